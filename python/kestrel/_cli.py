"""`Kestrel`: the `kestrel` command line driven from Python over `--json`."""

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from ._errors import CommandError

_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def format_value(key, value):
    """One `key=value` word as the CLI reads it (docs/cli.md).

    True/False -> true/false, a list or tuple -> [a,b,c] (imgsz=[320,256],
    freeze=[0,1,2]), a path -> its text, a number -> its repr. Raises
    ValueError naming the key for a value the command line cannot carry.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(key, v) for v in value) + "]"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        if "\n" in value or "\0" in value:
            raise ValueError(f"key '{key}': a value with a newline or NUL cannot go on the command line")
        return value
    raise ValueError(f"key '{key}': cannot pass a {type(value).__name__} ({value!r}); "
                     "use a str, number, bool, path or list")


def key_words(keys):
    """`key=value` words for the keys whose value is not None, in the given order."""
    words = []
    for key, value in keys.items():
        if value is None:
            continue
        if not key or not set(key) <= _KEY_CHARS:
            raise ValueError(f"key '{key}': not a Kestrel key (lowercase letters, digits, '_', '-')")
        words.append(f"{key}={format_value(key, value)}")
    return words


@dataclass
class Box:
    """One detection: `xyxy` corners in the source image's pixels."""
    xyxy: tuple
    conf: float
    cls: int
    name: str


@dataclass
class ImageResult:
    """One image's detections from `Kestrel.predict`."""
    source: str
    width: int
    height: int
    boxes: list
    output: str = ""


class Predictions(list):
    """The `ImageResult`s of a predict run, in the order the CLI printed them.

    `skipped` lists the sources the run skipped (with why), `speed` the
    per-image times, `dir` the run folder, `document` the whole `--json`
    document.
    """

    def __init__(self, images, document):
        super().__init__(images)
        self.document = document
        self.skipped = document.get("skipped", [])
        self.speed = document.get("speed", {})
        self.dir = document.get("dir", "")


def _parse_predictions(doc):
    images = []
    for img in doc.get("images", []):
        boxes = [Box(xyxy=tuple(d["box_xyxy"]), conf=d["confidence"], cls=d["class_id"],
                     name=d.get("name", "")) for d in img.get("detections", [])]
        images.append(ImageResult(source=img.get("source", ""), width=img.get("width", 0),
                                  height=img.get("height", 0), boxes=boxes,
                                  output=img.get("output", "")))
    return Predictions(images, doc)


def _name(words):
    return os.fspath(words[0]) if words else ""


def _failure_without_error(doc):
    skipped = doc.get("skipped") or []
    if skipped:
        first = skipped[0]
        return (f"skipped {len(skipped)} source(s); first: {first.get('source', '?')}: "
                f"{first.get('reason', '?')}")
    return "the command failed without an error document"


def find_binary(binary=None):
    """The `kestrel` executable: `binary`, else $KESTREL_BIN, else `kestrel` on PATH."""
    candidate = binary or os.environ.get("KESTREL_BIN") or shutil.which("kestrel")
    if not candidate:
        raise FileNotFoundError("kestrel binary not found: pass Kestrel(binary=...), set KESTREL_BIN "
                                "or put `kestrel` on PATH (built at build/src/cli/kestrel)")
    path = os.fspath(candidate)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"kestrel binary '{path}' is not an executable file")
    return path


class Kestrel:
    """Runs `kestrel` commands and returns their `--json` documents.

    binary: the executable (default $KESTREL_BIN, else `kestrel` on PATH).
    home: the Kestrel home (`--home`; default the CLI's: $KESTREL_HOME or ./.kestrel).
    quiet: capture the commands' stderr (progress, tables) instead of
      passing it through; it is then attached to a CommandError.
    timeout: seconds a command may run (None: no limit); past it
      subprocess.TimeoutExpired is raised and the command is killed.
    Keyword arguments of the methods are the CLI's keys (docs/cli.md);
    None leaves a key out. A failed command raises CommandError.
    """

    def __init__(self, binary=None, home=None, quiet=False, timeout=None, env=None):
        self.binary = find_binary(binary)
        self.home = os.path.expanduser(os.fspath(home)) if home is not None else None
        self.quiet = quiet
        self.timeout = timeout
        self.env = env

    def command(self, *words, **keys):
        """The argument list `run` would execute."""
        argv = [self.binary, "--json"]
        if self.home is not None:
            argv += ["--home", self.home]
        return argv + [os.fspath(w) for w in words] + key_words(keys)

    def run(self, *words, **keys):
        """Runs `kestrel --json WORDS key=value...`; returns the parsed document.

        Raises CommandError when the command exits non-zero or prints
        `"ok": false` (with the CLI's error document), or when it prints
        no JSON document (error code "no_document").
        """
        argv = self.command(*words, **keys)
        proc = subprocess.run(argv, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE if self.quiet else None,
                              env=self.env, timeout=self.timeout, check=False)
        stderr = proc.stderr.decode("utf-8", "replace") if proc.stderr else ""
        text = proc.stdout.decode("utf-8", "replace")
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            tail = (stderr or text).strip()[-2000:]
            raise CommandError(proc.returncode,
                               {"code": "no_document",
                                "message": f"no JSON document on stdout (exit {proc.returncode})"
                                           + (f": {tail}" if tail else "")},
                               argv, stderr, name=_name(words))
        if proc.returncode != 0 or doc.get("ok") is False:
            error = doc.get("error")
            if not isinstance(error, dict):
                error = {"code": "failed", "message": _failure_without_error(doc)}
            raise CommandError(proc.returncode, error, argv, stderr, document=doc, name=_name(words))
        return doc

    def train(self, data=None, model=None, epochs=None, **keys):
        """`kestrel train`: the run's document — `best` and `epochs` (per-epoch
        losses, mAP50, mAP50-95, precision, recall), `weights`, `run_dir`,
        `exit_reason`."""
        return self.run("train", data=data, model=model, epochs=epochs, **keys)

    def val(self, model=None, data=None, **keys):
        """`kestrel val`: the document; `["result"]["metrics"]` holds map50,
        map5095, precision, recall, fitness and the per-class rows."""
        return self.run("val", model=model, data=data, **keys)

    def predict(self, source, model=None, allow_skipped=False, **keys):
        """`kestrel predict`: a `Predictions` list, one `ImageResult` per image.

        A source the CLI skipped (an unreadable image) makes it exit 1 after
        writing the others: that raises CommandError (its `document` holds
        the partial results) unless allow_skipped=True, which returns the
        images predicted with `.skipped` naming the rest.
        """
        try:
            doc = self.run("predict", model=model, source=source, **keys)
        except CommandError as e:
            if not (allow_skipped and e.document and "error" not in e.document
                    and e.document.get("skipped")):
                raise
            doc = e.document
        return _parse_predictions(doc)

    def export(self, model=None, format=None, **keys):  # noqa: A002 (the CLI's key)
        """`kestrel export`: the document; `["path"]` is the written file and
        `["verification"]` how it compared with LibTorch."""
        return self.run("export", model=model, format=format, **keys)


__all__ = ["Kestrel", "Box", "ImageResult", "Predictions", "find_binary", "format_value", "key_words"]
