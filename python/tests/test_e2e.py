"""The package against the real `kestrel` (build/src/cli/kestrel or
$KESTREL_BIN) on a tiny synthetic dataset: train, val, predict, export and
their errors through Kestrel; a job submitted, watched to its end and read
back through Client against `kestrel serve` on a free loopback port.
Skipped when the binary is absent. ~15 s on 2 cores."""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from kestrel import ApiError, Client, CommandError, Kestrel  # noqa: E402

BINARY = os.environ.get("KESTREL_BIN") or str(REPO / "build" / "src" / "cli" / "kestrel")
HAVE_BINARY = os.path.isfile(BINARY) and os.access(BINARY, os.X_OK)
NAMES = {"circle", "rectangle"}
TINY = dict(imgsz=64, batch=4, nbs=4, plots=False, seed=1)


@unittest.skipUnless(HAVE_BINARY, f"no kestrel binary at {BINARY} (build it, or set KESTREL_BIN)")
class KestrelEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="kestrel-py-")
        cls.root = pathlib.Path(cls.tmp.name)
        cls.k = Kestrel(binary=BINARY, home=cls.root / "home", quiet=True, timeout=300)
        cls.k.run("dataset", "synth", cls.root / "ds", "--images", "12", "--classes", "2",
                  "--imgsz", "64", "--seed", "1")
        cls.data = str(cls.root / "ds" / "data.yaml")
        cls.runs = str(cls.root / "runs")
        try:
            cls.train = cls.k.train(data=cls.data, model="n", epochs=1, project=cls.runs, name="t", **TINY)
        except CommandError as e:
            cls.tmp.cleanup()
            if "built without LibTorch" in e.message:
                raise unittest.SkipTest(f"this kestrel cannot train: {e}")
            raise
        cls.best = cls.train["weights"]["best"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_train_returns_the_runs_metrics(self):
        self.assertEqual(self.train["exit_reason"], "completed")
        self.assertEqual(self.train["epochs_completed"], 1)
        epoch = self.train["epochs"][0]
        for key in ("box", "cls", "dfl", "map50", "map50_95", "precision", "recall"):
            self.assertIsInstance(epoch[key], float, key)
        self.assertTrue(os.path.isfile(self.best))
        self.assertEqual(self.train["data"]["dataset"], "ds")

    def test_val_returns_metrics(self):
        doc = self.k.val(model=self.best, data=self.data, project=self.runs, name="v", imgsz=64, plots=False)
        metrics = doc["result"]["metrics"]
        self.assertEqual(metrics["images"], 3)  # the synth val split: 25 % of 12
        for key in ("map50", "map5095", "precision", "recall", "fitness"):
            self.assertGreaterEqual(metrics[key], 0.0, key)
        self.assertEqual({c["name"] for c in metrics["classes"]}, NAMES)

    def test_predict_returns_boxes_per_image(self):
        val_dir = self.root / "ds" / "images" / "val"
        preds = self.k.predict(val_dir, model=self.best, imgsz=64, conf=0.0001,
                               project=self.runs, name="p", save=False)
        self.assertEqual(sorted(os.path.basename(p.source) for p in preds), sorted(os.listdir(val_dir)))
        self.assertTrue(any(p.boxes for p in preds))
        for p in preds:
            self.assertEqual((p.width, p.height), (64, 64))
            for b in p.boxes:
                self.assertIn(b.name, NAMES)
                self.assertIn(b.cls, (0, 1))
                self.assertTrue(0.0 < b.conf <= 1.0)
                x1, y1, x2, y2 = b.xyxy
                self.assertTrue(0 <= x1 <= x2 <= 64 and 0 <= y1 <= y2 <= 64, b)

    def test_predict_with_an_unreadable_image(self):
        mix = self.root / "mix"
        mix.mkdir(exist_ok=True)
        first = sorted((self.root / "ds" / "images" / "val").iterdir())[0]
        shutil.copy(first, mix / first.name)
        (mix / "broken.jpg").write_bytes(b"not an image")
        with self.assertRaises(CommandError) as cm:
            self.k.predict(mix, model=self.best, imgsz=64, project=self.runs, name="pm1", save=False)
        self.assertEqual(cm.exception.exit_code, 1)
        self.assertIn("broken.jpg", cm.exception.message)
        preds = self.k.predict(mix, model=self.best, imgsz=64, project=self.runs, name="pm2",
                               save=False, allow_skipped=True)
        self.assertEqual([os.path.basename(p.source) for p in preds], [first.name])
        self.assertEqual(len(preds.skipped), 1)

    def test_export_writes_a_verified_onnx(self):
        out = self.root / "tiny.onnx"
        doc = self.k.export(model=self.best, format="onnx", imgsz=64, output=out)
        self.assertEqual(doc["path"], str(out))
        self.assertTrue(out.is_file())
        self.assertTrue(doc["verification"]["verified"])
        self.assertEqual(doc["names"], sorted(NAMES))

    def test_errors_carry_the_exit_code_and_field(self):
        with self.assertRaises(CommandError) as cm:
            # Tiny keys: were the value taken, a 1-epoch run fails fast instead of a default one timing out.
            self.k.train(data=self.data, workers=-2, model="n", epochs=1, project=self.runs, name="err", **TINY)
        self.assertEqual((cm.exception.exit_code, cm.exception.code, cm.exception.field), (2, "usage", "workers"))
        with self.assertRaises(CommandError) as cm:
            self.k.predict(self.root / "ds" / "images" / "val", model=self.root / "missing.pt")
        self.assertEqual((cm.exception.exit_code, cm.exception.code, cm.exception.field), (1, "not_found", "model"))
        with self.assertRaises(CommandError) as cm:
            self.k.val(model=self.best, data=self.data, no_such_key=1)
        self.assertEqual((cm.exception.exit_code, cm.exception.field), (2, "no_such_key"))

    def test_client_against_kestrel_serve(self):
        token = self.k.run("token", "create", "--name", "py-e2e")["token"]
        home = str(self.root / "home")
        server = subprocess.Popen([BINARY, "--home", home, "serve", "--port", "0", "--workers", "1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = server.stdout.readline()
            self.assertIn("listening on http://", line)
            url = line.strip().rsplit(" ", 1)[-1]
            client = Client(url, token=token, timeout=60)

            with self.assertRaises(ApiError) as cm:
                Client(url, token="kst_0_bad").jobs()
            self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthenticated"))
            with self.assertRaises(ApiError) as cm:
                client.submit(kind="train", data="ds", epochs=1, imgsz=64, batch="many")
            self.assertEqual((cm.exception.status, cm.exception.field), (400, "batch"))

            sub = client.submit(kind="train", data="ds", model="n", epochs=1, **TINY)
            self.assertTrue(sub["created"])
            job_id = sub["job_id"]
            seen = []
            job = client.wait(job_id, on_event=seen.append)
            self.assertEqual(job["state"], "succeeded")
            self.assertEqual(seen[-1].kind, "state")
            self.assertEqual(seen[-1].payload["state"], "succeeded")
            self.assertEqual([e.id for e in seen], sorted(e.id for e in seen))
            epochs = [e for e in seen if e.kind == "metric" and e.payload.get("type") == "epoch"]
            self.assertEqual(len(epochs), 1, [(e.id, e.kind, e.payload) for e in seen if e.kind != "progress"])

            series = client.metrics(job_id, series=["metrics/mAP50(B)"], width=100)
            self.assertEqual([s["name"] for s in series["series"]], ["metrics/mAP50(B)"])
            self.assertEqual(series["series"][0]["data"][0][0], 1)
            self.assertGreaterEqual(series["last_event_id"], epochs[0].id)

            self.assertIn(job_id, [j["id"] for j in client.jobs(state="succeeded")])
            # Registered just after the success is committed: model_of polls.
            mine = client.model_of(job_id, timeout=30)
            self.assertEqual(mine["dataset"], "ds")
            self.assertIn(mine["ref"], [m["ref"] for m in client.models(dataset="ds")])
            self.assertEqual(client.model(mine["ref"])["job_id"], job_id)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            server.stdout.close()


if __name__ == "__main__":
    unittest.main()
