"""Kestrel (the CLI driver) against a fake `kestrel`: the argument lists it
builds, the documents it returns and how a failed command is raised."""

import json
import os
import pathlib
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kestrel import Box, CommandError, Kestrel  # noqa: E402
from kestrel._cli import format_value, key_words  # noqa: E402

# The fake binary: records its argv in $FAKE_ARGV, then prints $FAKE_STDOUT
# (a file) on stdout, $FAKE_STDERR on stderr and exits $FAKE_RC.
FAKE = """#!{python}
import json, os, sys
with open(os.environ["FAKE_ARGV"], "w") as f:
    json.dump(sys.argv[1:], f)
with open(os.environ["FAKE_STDOUT"]) as f:
    sys.stdout.write(f.read())
sys.stderr.write(os.environ.get("FAKE_STDERR", ""))
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


class FakeBinaryTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = pathlib.Path(self.dir.name)
        self.binary = root / "kestrel"
        self.binary.write_text(FAKE.format(python=sys.executable))
        self.binary.chmod(self.binary.stat().st_mode | stat.S_IXUSR)
        self.argv_file = root / "argv.json"
        self.stdout_file = root / "stdout.txt"
        self.env = dict(os.environ, FAKE_ARGV=str(self.argv_file), FAKE_STDOUT=str(self.stdout_file))

    def tearDown(self):
        self.dir.cleanup()

    def answer(self, doc, rc=0, stderr=""):
        self.stdout_file.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        self.env["FAKE_RC"] = str(rc)
        self.env["FAKE_STDERR"] = stderr

    def kestrel(self, **kw):
        return Kestrel(binary=self.binary, env=self.env, quiet=True, **kw)

    def argv(self):
        return json.loads(self.argv_file.read_text())

    def test_train_passes_keys_and_returns_the_document(self):
        self.answer({"ok": True, "best": {"map50": 0.5, "map50_95": 0.25, "epoch": 3},
                     "epochs": [{"epoch": 1}], "weights": {"best": "/r/best.safetensors"}})
        run = self.kestrel(home="/tmp/khome").train(
            data="shapes/data.yaml", model="n", epochs=3, imgsz=[320, 256], plots=False,
            lr0=0.01, project=pathlib.Path("/runs"), name=None, freeze=[0, 1, 2])
        self.assertEqual(run["best"]["map50"], 0.5)
        self.assertEqual(run["weights"]["best"], "/r/best.safetensors")
        self.assertEqual(self.argv(), ["--json", "--home", "/tmp/khome", "train",
                                       "data=shapes/data.yaml", "model=n", "epochs=3",
                                       "imgsz=[320,256]", "plots=false", "lr0=0.01",
                                       "project=/runs", "freeze=[0,1,2]"])

    def test_home_is_left_to_the_cli_when_not_given(self):
        self.answer({"ok": True})
        self.kestrel().val(model="m.safetensors", data="d", half=True)
        self.assertEqual(self.argv(), ["--json", "val", "model=m.safetensors", "data=d", "half=true"])

    def test_export_and_format(self):
        self.answer({"path": "m.onnx", "verification": {"verified": True}})
        doc = self.kestrel().export(model="m.safetensors", format="onnx", dynamic=True)
        self.assertEqual(doc["path"], "m.onnx")
        self.assertEqual(self.argv(), ["--json", "export", "model=m.safetensors", "format=onnx",
                                       "dynamic=true"])

    def test_predict_returns_boxes_per_image(self):
        self.answer({"ok": True, "dir": "/runs/p", "skipped": [], "speed": {"images": 2},
                     "images": [{"source": "a.jpg", "width": 64, "height": 48, "output": "a",
                                 "detections": [{"box_xyxy": [1.0, 2.0, 30.0, 40.0], "class_id": 1,
                                                 "confidence": 0.9, "name": "square"}]},
                                {"source": "b.jpg", "width": 64, "height": 64, "output": "b",
                                 "detections": []}]})
        preds = self.kestrel().predict("imgs/", model="m.safetensors", conf=0.5)
        self.assertEqual(self.argv(), ["--json", "predict", "model=m.safetensors", "source=imgs/", "conf=0.5"])
        self.assertEqual([p.source for p in preds], ["a.jpg", "b.jpg"])
        self.assertEqual(preds[0].boxes, [Box(xyxy=(1.0, 2.0, 30.0, 40.0), conf=0.9, cls=1, name="square")])
        self.assertEqual((preds[0].width, preds[0].height), (64, 48))
        self.assertEqual(preds[1].boxes, [])
        self.assertEqual(preds.dir, "/runs/p")
        self.assertEqual(preds.speed, {"images": 2})

    def test_a_usage_error_carries_exit_code_and_field(self):
        self.answer({"ok": False, "error": {"code": "usage", "field": "workers", "file": "command line",
                                            "line": 0, "message": "value -2 is outside the allowed range [-1, 256]"}},
                    rc=2, stderr="error: command line: field 'workers': ...\n")
        with self.assertRaises(CommandError) as cm:
            self.kestrel().train(data="d", workers=-2)
        e = cm.exception
        self.assertEqual(e.exit_code, 2)
        self.assertEqual(e.code, "usage")
        self.assertEqual(e.field, "workers")
        self.assertEqual(e.message, "value -2 is outside the allowed range [-1, 256]")
        self.assertEqual(e.error["file"], "command line")
        self.assertIn("field 'workers'", e.stderr)
        self.assertIn("kestrel train exited 2", str(e))
        self.assertIn("field 'workers'", str(e))

    def test_a_failed_command_carries_its_error_document(self):
        self.answer({"ok": False, "error": {"code": "not_found", "field": "model", "file": "/x.pt",
                                            "line": 0, "message": "model weights not found"}}, rc=1)
        with self.assertRaises(CommandError) as cm:
            self.kestrel().predict("imgs", model="/x.pt")
        self.assertEqual((cm.exception.exit_code, cm.exception.code, cm.exception.field),
                         (1, "not_found", "model"))

    def test_ok_false_with_exit_zero_is_still_an_error(self):
        self.answer({"ok": False, "error": {"code": "internal", "message": "boom"}}, rc=0)
        with self.assertRaises(CommandError) as cm:
            self.kestrel().val(model="m")
        self.assertEqual(cm.exception.message, "boom")

    def test_skipped_sources_raise_unless_allowed(self):
        doc = {"ok": False, "dir": "/runs/p", "predicted": 1,
               "skipped": [{"source": "bad.jpg", "reason": "unknown image format"}],
               "images": [{"source": "a.jpg", "width": 8, "height": 8, "detections": []}]}
        self.answer(doc, rc=1)
        with self.assertRaises(CommandError) as cm:
            self.kestrel().predict("mix")
        self.assertEqual(cm.exception.exit_code, 1)
        self.assertIn("bad.jpg", cm.exception.message)
        self.assertEqual(cm.exception.document["predicted"], 1)
        preds = self.kestrel().predict("mix", allow_skipped=True)
        self.assertEqual([p.source for p in preds], ["a.jpg"])
        self.assertEqual(preds.skipped[0]["source"], "bad.jpg")

    def test_output_that_is_not_json_is_an_error_with_stderr(self):
        self.answer("Segmentation fault\n", rc=139, stderr="terminate called\n")
        with self.assertRaises(CommandError) as cm:
            self.kestrel().val(model="m")
        self.assertEqual(cm.exception.exit_code, 139)
        self.assertEqual(cm.exception.code, "no_document")
        self.assertIn("terminate called", cm.exception.message)
        self.assertIsNone(cm.exception.document)

    def test_missing_binary_says_where_it_looked(self):
        with self.assertRaises(FileNotFoundError) as cm:
            Kestrel(binary=os.path.join(self.dir.name, "nope"))
        self.assertIn("nope", str(cm.exception))

    def test_binary_from_the_environment(self):
        old = os.environ.get("KESTREL_BIN")
        os.environ["KESTREL_BIN"] = str(self.binary)
        try:
            self.assertEqual(Kestrel().binary, str(self.binary))
        finally:
            if old is None:
                del os.environ["KESTREL_BIN"]
            else:
                os.environ["KESTREL_BIN"] = old


class ValueFormatTest(unittest.TestCase):
    def test_values(self):
        self.assertEqual(format_value("k", True), "true")
        self.assertEqual(format_value("k", 0), "0")
        self.assertEqual(format_value("k", 0.25), "0.25")
        self.assertEqual(format_value("k", (320, 256)), "[320,256]")
        self.assertEqual(format_value("k", pathlib.PurePosixPath("a/b")), "a/b")

    def test_bad_values_name_the_key(self):
        with self.assertRaisesRegex(ValueError, "key 'data'"):
            format_value("data", {"a": 1})
        with self.assertRaisesRegex(ValueError, "key 'name'"):
            format_value("name", "a\nb")
        with self.assertRaisesRegex(ValueError, "key 'Bad Key'"):
            key_words({"Bad Key": 1})

    def test_none_is_left_out(self):
        self.assertEqual(key_words({"a": None, "b": 1}), ["b=1"])


if __name__ == "__main__":
    unittest.main()
