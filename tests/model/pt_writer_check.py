#!/usr/bin/python3
"""Development-time check of a .pt written by Kestrel (model/pt_writer.h).

usage: pt_writer_check.py (WRITTEN.pt GENUINE.pt|- STATE_DICT.safetensors)...

With Debian's python3-torch: torch.load(WRITTEN) with an Unpickler that maps
the reference framework's classes (ultralytics.*) to plain nn.Module
stand-ins (torch's own classes stay torch's), then
  1. its state_dict() equals STATE_DICT.safetensors exactly (names, order
     of the safetensors file aside, shapes, values);
  2. when a GENUINE checkpoint of the same model is given, the module tree is
     the same: class names, attribute names in order, attribute values (all
     but what a run records: args, the anchors of its last inference), tensor
     attributes by shape, and the state_dict names in the same order;
  3. where the reference framework is importable, YOLO(WRITTEN) loads it
     (it is not on this machine: that part says so and is skipped).
Exit status 0 when every check that could run passed.
"""
import json
import struct
import sys

import torch


class StandIn(torch.nn.Module):
    """The reference's module classes, as data (nothing of theirs runs)."""


_standins = {}


def _standin(module, name):
    key = module + "." + name
    if key not in _standins:
        _standins[key] = type(name, (StandIn,), {"_qualname": key})
    return _standins[key]


class _PickleModule:
    """A pickle_module for torch.load whose Unpickler never imports ultralytics."""

    import pickle as _pickle

    class Unpickler(_pickle.Unpickler):
        def find_class(self, module, name):
            if module.startswith("ultralytics"):
                return _standin(module, name)
            return super().find_class(module, name)

    load = _pickle.load


def load(path):
    # torch.load's own path, with our pickle module (Debian's torch.load
    # replaces a pickle_module argument by pickle, so call its _load).
    with open(path, "rb") as f, torch.serialization._open_zipfile_reader(f) as z:
        return torch.serialization._load(z, "cpu", _PickleModule, encoding="utf-8")


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": torch.float32, "F16": torch.float16, "I64": torch.int64, "F64": torch.float64}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return out


def qualname(obj):
    cls = type(obj)
    return getattr(cls, "_qualname", cls.__module__ + "." + cls.__name__)


# Attributes a run records rather than the model's structure.
IGNORED = {"args", "anchors", "strides", "shape"}


def compare_tree(a, b, path, errors):
    if qualname(a) != qualname(b):
        errors.append(f"{path}: class {qualname(a)} vs {qualname(b)}")
        return
    ka = [k for k in a.__dict__ if k not in IGNORED]
    kb = [k for k in b.__dict__ if k not in IGNORED]
    if ka != kb:
        errors.append(f"{path}: attributes {ka} vs {kb}")
        return
    for k in ka:
        va, vb = a.__dict__[k], b.__dict__[k]
        if k == "_modules":
            if list(va) != list(vb):
                errors.append(f"{path}: children {list(va)} vs {list(vb)}")
                continue
            for name in va:
                compare_tree(va[name], vb[name], f"{path}.{name}", errors)
        elif k in ("_parameters", "_buffers"):
            if list(va) != list(vb):
                errors.append(f"{path}.{k}: {list(va)} vs {list(vb)}")
                continue
            for name in va:
                ta, tb = va[name], vb[name]
                if (ta is None) != (tb is None) or (ta is not None and ta.shape != tb.shape):
                    errors.append(f"{path}.{name}: {ta if ta is None else ta.shape} vs {tb if tb is None else tb.shape}")
                elif ta is not None and type(ta) is not type(tb):
                    errors.append(f"{path}.{name}: {type(ta).__name__} vs {type(tb).__name__}")
        elif isinstance(va, torch.Tensor):
            if not isinstance(vb, torch.Tensor) or va.shape != vb.shape or not torch.equal(va.float(), vb.float()):
                errors.append(f"{path}.{k}: tensor {va} vs {vb}")
        elif "hook" in k:
            continue  # empty hook tables (their types differ across torch versions)
        elif va != vb or type(va) is not type(vb):
            errors.append(f"{path}.{k}: {va!r} vs {vb!r}")


def check(written, genuine, state_dict):
    ckpt = load(written)
    model = ckpt["model"]
    ok = True
    print(f"{written}: torch {torch.__version__} loaded it; model {qualname(model)}, epoch {ckpt['epoch']}, "
          f"train_args.imgsz {ckpt['train_args'].get('imgsz')}")
    want = read_safetensors(state_dict)
    got = model.state_dict()
    if set(got) != set(want):
        print("  FAIL state dict names differ:", sorted(set(got) ^ set(want))[:10])
        ok = False
    else:
        bad = [k for k in want if got[k].shape != want[k].shape or not torch.equal(got[k], want[k])]
        print(f"  state dict: {len(got)} tensors, {len(bad)} differ")
        ok = ok and not bad
    if genuine != "-":
        ref = load(genuine)
        errors = []
        compare_tree(model, ref["model"], "model", errors)
        if list(model.state_dict()) != list(ref["model"].state_dict()):
            errors.append("state_dict order differs from the genuine checkpoint's")
        missing = [k for k in ref if k not in ckpt and k not in ("license", "docs", "train_results")]
        if missing:
            errors.append(f"top-level keys missing: {missing}")
        print(f"  module tree vs {genuine}: {len(errors)} differences")
        for e in errors[:20]:
            print("   ", e)
        ok = ok and not errors
    try:
        from ultralytics import YOLO  # noqa: F401  (the reference framework, when installed)
    except ImportError:
        print("  reference framework not importable here: YOLO(path).val() skipped")
    else:
        m = YOLO(written)
        print("  YOLO() loaded it:", m.model.__class__.__name__, m.names)
    return ok


def main():
    args = sys.argv[1:]
    if not args or len(args) % 3:
        print(__doc__)
        return 2
    results = [check(*args[i:i + 3]) for i in range(0, len(args), 3)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
