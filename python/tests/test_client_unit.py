"""Client against an in-process fake of `kestrel serve`'s routes: the requests
it sends, the error it raises, and the event stream it follows across a
dropped connection."""

import json
import pathlib
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from kestrel import ApiError, Client  # noqa: E402

TOKEN = "kst_abc_secret"


def sse_block(ident, kind, data):
    return f"id: {ident}\nevent: {kind}\ndata: {json.dumps(data)}\n\n"


def state_event(ident, state):
    return sse_block(ident, "state", {"id": ident, "job_id": 7, "attempt": 1, "kind": "state",
                                      "payload": {"state": state}})


class FakeServer(BaseHTTPRequestHandler):
    requests = []  # (method, path, headers, body) of every request
    model_reads = 0

    def log_message(self, *args):
        pass

    def _record(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.requests.append((self.command, self.path, self.headers, body))
        return body

    def _json(self, status, doc):
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self):
        body = self._record()
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._json(401, {"ok": False, "error": {"code": "unauthenticated",
                                                           "field": "Authorization", "message": "needs a token"}})
        if self.path == "/ls/train":
            if json.loads(body) != {}:
                return self._json(400, {"ok": False, "error": {"code": "invalid_argument", "field": "body",
                                                               "message": "expected {}"}})
            return self._json(200, {"ok": True, "version": "birds@v3", "merge": {"added": 2},
                                    "job": {"job_id": 12, "created": True}, "counters": {"pending": 0}})
        keys = json.loads(body)["keys"]
        if keys.get("epochs") == 0:
            return self._json(400, {"ok": False, "error": {"code": "invalid_argument", "field": "epochs",
                                                           "file": "request", "line": 0,
                                                           "message": "epochs must be >= 1"}})
        self._json(201, {"ok": True, "job_id": 7, "created": True, "dedup_key": "d"})

    def do_GET(self):
        self._record()
        path = self.path.split("?")[0]
        if path == "/api/job-kinds":
            return self._json(200, {"ok": True, "kinds": [], "states": [
                {"name": "queued", "finished": False}, {"name": "running", "finished": False},
                {"name": "failed_retryable", "finished": False}, {"name": "succeeded", "finished": True},
                {"name": "failed_permanent", "finished": True}, {"name": "cancelled", "finished": True}]})
        if path == "/api/jobs":
            return self._json(200, {"ok": True, "jobs": [{"id": 7}], "total": 1})
        if path == "/api/runs":
            return self._json(200, {"ok": True, "runs": [{"id": 7, "config": {"lr0": 0.01}, "metrics": {}}],
                                    "keys": ["lr0"], "series": [], "total": 1, "next_cursor": None})
        if path == "/api/jobs/7":
            return self._json(200, {"job": {"id": 7, "state": "succeeded"}, "attempts": []})
        if path == "/api/jobs/8":
            return self._json(404, {"ok": False, "error": {"code": "not_found", "field": "job",
                                                           "message": "no job 8"}})
        if path == "/api/models":
            # The model of job 7 shows up on the third read (registered after
            # the job's success was committed).
            FakeServer.model_reads += 1
            models = [{"ref": "birds@v1", "job_id": 3}]
            if FakeServer.model_reads >= 3:
                models.append({"ref": "birds@v2", "job_id": 7})
            return self._json(200, {"ok": True, "models": models})
        if path == "/api/studies":
            return self._json(200, {"ok": True, "studies": [{"name": "lr", "state": "running"}]})
        if path == "/api/studies/lr":
            return self._json(200, {"ok": True, "study": {"name": "lr"}, "trials": [], "best": None})
        if path == "/api/models/birds%40v2":
            return self._json(200, {"ok": True, "model": {"ref": "birds@v2"}})
        if path == "/api/jobs/7/events":
            # First connection: two events, then the server ends the stream
            # (its lifetime); the reconnect must send Last-Event-ID: 2.
            last = self.headers.get("Last-Event-ID")
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            if last is None:
                text = "retry: 10\n\n" + state_event(1, "queued") + ": keep-alive\n\n" + state_event(2, "running")
            else:
                text = (sse_block(3, "metric", {"id": 3, "payload": {"type": "epoch", "values": {"x": 1}}})
                        + state_event(4, "failed_retryable") + state_event(5, "succeeded")
                        + state_event(6, "never-read"))
            self.wfile.write(text.encode())
            self.close_connection = True
            return
        self._json(404, {"ok": False, "error": {"code": "not_found", "message": "no route"}})


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
        cls.thread = threading.Thread(target=cls.server.serve_forever, daemon=True)
        cls.thread.start()
        cls.url = f"http://127.0.0.1:{cls.server.server_address[1]}/"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        FakeServer.requests.clear()
        self.client = Client(self.url, token=TOKEN, timeout=10)

    def test_submit_sends_the_keys_and_the_token(self):
        doc = self.client.submit(kind="train", data="birds", epochs=3, imgsz=None)
        self.assertEqual(doc["job_id"], 7)
        method, path, headers, body = FakeServer.requests[-1]
        self.assertEqual((method, path), ("POST", "/api/jobs"))
        self.assertEqual(headers["Authorization"], f"Bearer {TOKEN}")
        self.assertEqual(json.loads(body), {"keys": {"kind": "train", "data": "birds", "epochs": 3}})
        self.client.submit(template="fast@v2", data="birds")
        self.assertEqual(json.loads(FakeServer.requests[-1][3])["template"], "fast@v2")

    def test_an_error_answer_carries_status_and_field(self):
        with self.assertRaises(ApiError) as cm:
            self.client.submit(kind="train", data="birds", epochs=0)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field, e.message),
                         (400, "invalid_argument", "epochs", "epochs must be >= 1"))
        self.assertIn("HTTP 400", str(e))
        with self.assertRaises(ApiError) as cm:
            Client(self.url).submit(kind="train")
        self.assertEqual((cm.exception.status, cm.exception.field), (401, "Authorization"))
        with self.assertRaises(ApiError) as cm:
            self.client.job(8)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))

    def test_reads_build_their_paths_and_queries(self):
        self.assertEqual(self.client.jobs(state=["queued", "running"], limit=5, kind=None), [{"id": 7}])
        self.assertEqual(FakeServer.requests[-1][1], "/api/jobs?state=queued%2Crunning&limit=5")
        self.assertEqual(self.client.model("birds@v2")["ref"], "birds@v2")
        self.assertEqual(self.client.job(7)["job"]["state"], "succeeded")
        self.assertEqual(self.client.studies(), [{"name": "lr", "state": "running"}])
        self.assertEqual(self.client.study("lr")["study"]["name"], "lr")
        self.assertEqual(FakeServer.requests[-1][1], "/api/studies/lr")
        runs = self.client.runs(keys=["lr0", "mosaic"], metrics=["metrics/mAP50-95(B)"], limit=50)
        self.assertEqual(runs["runs"][0]["config"], {"lr0": 0.01})
        self.assertEqual(FakeServer.requests[-1][1],
                         "/api/runs?limit=50&keys=lr0%2Cmosaic&metrics=metrics%2FmAP50-95%28B%29")
        self.client.runs(ids=[7, 9])
        self.assertEqual(FakeServer.requests[-1][1], "/api/runs?ids=7%2C9")

    def test_watch_reconnects_with_last_event_id_and_stops_when_finished(self):
        seen = []
        job = self.client.wait(7, on_event=seen.append)
        self.assertEqual([e.id for e in seen], [1, 2, 3, 4, 5])
        self.assertEqual([e.kind for e in seen], ["state", "state", "metric", "state", "state"])
        self.assertEqual(seen[2].payload["values"], {"x": 1})
        self.assertEqual(job["state"], "succeeded")
        streams = [r for r in FakeServer.requests if r[1] == "/api/jobs/7/events"]
        self.assertEqual(len(streams), 2)
        self.assertIsNone(streams[0][2].get("Last-Event-ID"))
        self.assertEqual(streams[1][2]["Last-Event-ID"], "2")
        self.assertEqual(streams[1][2]["Accept"], "text/event-stream")

    def test_model_of_polls_until_the_job_registered_one(self):
        FakeServer.model_reads = 0
        self.assertEqual(self.client.model_of(7, timeout=10, poll=0.01)["ref"], "birds@v2")
        self.assertEqual(FakeServer.model_reads, 3)
        FakeServer.model_reads = 0
        with self.assertRaisesRegex(TimeoutError, "job 9"):
            self.client.model_of(9, timeout=0.05, poll=0.01)

    def test_ls_train_posts_an_empty_body_with_the_token(self):
        doc = self.client.ls_train()
        self.assertEqual((doc["version"], doc["job"]["job_id"]), ("birds@v3", 12))
        method, path, headers, body = FakeServer.requests[-1]
        self.assertEqual((method, path, json.loads(body)), ("POST", "/ls/train", {}))
        self.assertEqual(headers["Authorization"], f"Bearer {TOKEN}")
        with self.assertRaises(ApiError) as cm:
            Client(self.url).ls_train()
        self.assertEqual((cm.exception.status, cm.exception.field), (401, "Authorization"))

    def test_events_without_reconnect_end_with_the_stream(self):
        events = list(self.client.events(7, reconnect=False))
        self.assertEqual([e.id for e in events], [1, 2])


if __name__ == "__main__":
    unittest.main()
