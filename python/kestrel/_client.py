"""`Client`: the REST API of `kestrel serve` (docs/server.md) over urllib."""

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from ._errors import ApiError


@dataclass
class Event:
    """One Server-Sent Event of a job stream: `id` (the store's event id),
    `kind` (`state`, `metric`, `progress`) and `data` (the parsed JSON:
    {"id", "job_id", "attempt", "kind", "created_ms", "payload"})."""
    id: int
    kind: str
    data: dict

    @property
    def payload(self):
        return self.data.get("payload", {}) if isinstance(self.data, dict) else {}


class Client:
    """A `kestrel serve` server at `url` (e.g. "http://127.0.0.1:8080").

    token: an API token (`kestrel token create`), sent as
      `Authorization: Bearer TOKEN`; None for a server run with --public-read.
    timeout: seconds to wait for a response (and, on an event stream, for
      the next line; the server sends a keep-alive every 15 s).
    A route's error answer raises ApiError with the HTTP status and the
    server's error document (code, message, field).
    """

    def __init__(self, url, token=None, timeout=30.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._finished_states = None

    # -- plumbing ---------------------------------------------------------

    def _url(self, path, query=None):
        url = self.url + path
        if query:
            pairs = [(k, ",".join(map(str, v)) if isinstance(v, (list, tuple)) else
                      ("true" if v is True else "false" if v is False else v))
                     for k, v in query.items() if v is not None]
            if pairs:
                url += "?" + urllib.parse.urlencode(pairs)
        return url

    def _open(self, method, path, query=None, body=None, headers=None, timeout=None):
        url = self._url(path, query)
        data = None
        head = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            head["Content-Type"] = "application/json"
        if self.token:
            head["Authorization"] = f"Bearer {self.token}"
        head.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=head)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                doc = json.loads(raw)
                error = doc.get("error") if isinstance(doc, dict) else None
            except ValueError:
                error = None
            if not isinstance(error, dict):
                error = {"code": "http_error",
                         "message": raw.decode("utf-8", "replace").strip()[:500] or e.reason}
            raise ApiError(e.code, error, method, url) from None

    def request(self, method, path, query=None, body=None):
        """One JSON route: the parsed answer. `query` values of None are left out."""
        with self._open(method, path, query, body) as resp:
            return json.loads(resp.read())

    @staticmethod
    def _segment(value):
        return urllib.parse.quote(str(value), safe="")

    # -- jobs ---------------------------------------------------------------

    def submit(self, template=None, **keys):
        """`POST /api/jobs`: queue a job of the given keys (kind=train|val|export,
        data=, model=, epochs=, …; as `kestrel submit`). Returns
        {"ok", "job_id", "created", "dedup_key"} (created False: an identical
        job is already live, `job_id` is that one)."""
        body = {"keys": {k: v for k, v in keys.items() if v is not None}}
        if template is not None:
            body["template"] = template
        return self.request("POST", "/api/jobs", body=body)

    def job(self, job_id):
        """`GET /api/jobs/{id}`: {"job", "attempts"}."""
        return self.request("GET", f"/api/jobs/{self._segment(job_id)}")

    def jobs(self, **filters):
        """`GET /api/jobs`: one page of jobs (the list). Filters as the route:
        state=, kind=, priority=, dataset=, sort=, order=, limit=, before=, offset=."""
        return self.request("GET", "/api/jobs", query=filters)["jobs"]

    def cancel(self, job_id):
        return self.request("POST", f"/api/jobs/{self._segment(job_id)}/cancel", body={})

    def retry(self, job_id):
        return self.request("POST", f"/api/jobs/{self._segment(job_id)}/retry", body={})

    def metrics(self, job_id, series=None, width=None, start=None, end=None, events=None):
        """`GET /api/jobs/{id}/metrics`: the job's metric series ("names",
        "series": [{"name", "x", "points", "downsampled", "data": [[x, y], …]}],
        "progress", "last_event_id"). `series` a list of names; `start`/`end`
        the route's from/to."""
        query = {"series": series, "width": width, "from": start, "to": end, "events": events}
        return self.request("GET", f"/api/jobs/{self._segment(job_id)}/metrics", query=query)

    def runs(self, keys=None, metrics=None, ids=None, **filters):
        """`GET /api/runs`: a page of training runs (kind= for another kind;
        state=, dataset=, search=, limit=, before= as the route) with each
        run's config values (`keys`, a list of config keys; every key when
        None) and a summary of each metric series (`metrics`, a list of
        series names; every series when None): {"runs": [{"id", "name",
        "tags", "state", "dataset", "duration_s", "config": {key: value},
        "metrics": {series: {"axis", "count", "last", "min", "max", "last_x",
        "min_x", "max_x"}}}], "keys", "series", "total", "next_cursor"}.
        `ids`: a list of job ids, exactly those runs in that order."""
        query = dict(filters, keys=keys, metrics=metrics, ids=ids)
        return self.request("GET", "/api/runs", query=query)

    # -- studies ------------------------------------------------------------

    def studies(self):
        """`GET /api/studies`: the hyperparameter studies, newest first
        (docs/server.md "Studies")."""
        return self.request("GET", "/api/studies")["studies"]

    def study(self, name):
        """`GET /api/studies/{name}`: the study, its space, trials, best
        trial and importances (the document of `kestrel tune show --json`)."""
        return self.request("GET", f"/api/studies/{self._segment(name)}")

    # -- labelling loop -----------------------------------------------------

    def ls_train(self):
        """`POST /ls/train`: merge the Label Studio annotations the server's
        webhook collected as a new dataset version and, with `kestrel serve
        --ls-train-template`, queue the fine-tune job on it (docs/server.md
        "Label Studio ML backend"). Returns {"ok", "version", "merge", "job",
        "counters"}; "version" is null when nothing was pending, "job" then and
        without a template. An annotation that does not fit the dataset is
        an ApiError 400 (field, message with the findings) and stays pending."""
        return self.request("POST", "/ls/train", body={})

    # -- models -------------------------------------------------------------

    def models(self, **filters):
        """`GET /api/models`: the registered models (filters name=, dataset=, tag=)."""
        return self.request("GET", "/api/models", query=filters)["models"]

    def model(self, ref):
        """`GET /api/models/{ref}`: one model (NAME, NAME@vN, NAME@TAG, id prefix)."""
        return self.request("GET", f"/api/models/{self._segment(ref)}")["model"]

    def model_of(self, job_id, timeout=10.0, poll=0.2):
        """The model a succeeded job registered. The worker registers it just
        after it commits the job's success (docs/models.md), so right after
        `wait` it may not be listed yet: this polls `GET /api/models` until
        it is, raising TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = [m for m in self.models() if m.get("job_id") == job_id]
            if found:
                return found[0]
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no model registered from job {job_id} within {timeout} s "
                                   f"(a failed registration: kestrel models register --job {job_id})")
            time.sleep(poll)

    # -- events ---------------------------------------------------------------

    def events(self, job_id=None, last_event_id=None, reconnect=True):
        """Server-Sent Events of one job (or every job when job_id is None), as
        `Event`s, from after `last_event_id` (None: from the first).

        When the server ends the stream (its --stream-max-seconds, a restart)
        and `reconnect` is true, it reconnects after the server's `retry:`
        delay with Last-Event-ID, so no event is missed or repeated; the
        generator ends only when the caller stops iterating (or with
        reconnect=False, when the stream ends).
        """
        path = "/api/events" if job_id is None else f"/api/jobs/{self._segment(job_id)}/events"
        retry_ms = 1000
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_event_id is not None:
                headers["Last-Event-ID"] = str(last_event_id)
            with self._open("GET", path, headers=headers) as resp:
                for event, retry in _read_sse(resp):
                    if retry is not None:
                        retry_ms = retry
                    if event is not None:
                        last_event_id = event.id
                        yield event
            if not reconnect:
                return
            time.sleep(retry_ms / 1000.0)

    def finished_states(self):
        """The job states after which nothing more happens (from /api/job-kinds)."""
        if self._finished_states is None:
            kinds = self.request("GET", "/api/job-kinds")
            self._finished_states = {s["name"] for s in kinds.get("states", []) if s.get("finished")}
        return self._finished_states

    def watch(self, job_id, last_event_id=None):
        """The events of one job until its state event that is finished
        (succeeded, failed_permanent, cancelled; a retryable failure goes on).
        The last event yielded is that state event."""
        finished = self.finished_states()
        for event in self.events(job_id, last_event_id=last_event_id):
            yield event
            if event.kind == "state" and event.payload.get("state") in finished:
                return

    def wait(self, job_id, on_event=None):
        """Follows `watch` to the job's end and returns the finished job
        (`job(job_id)["job"]`); `on_event(event)` sees each event on the way."""
        for event in self.watch(job_id):
            if on_event is not None:
                on_event(event)
        return self.job(job_id)["job"]


def _read_sse(resp):
    """(Event or None, retry ms or None) per dispatched block of an SSE stream."""
    ident, kind, data = None, None, []
    while True:
        raw = resp.readline()
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data:
                text = "\n".join(data)
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = {"text": text}
                event_id = int(ident) if ident is not None and ident.isdigit() else (
                    parsed.get("id") if isinstance(parsed, dict) else None)
                yield Event(id=event_id, kind=kind or "message", data=parsed), None
            ident, kind, data = None, None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "id":
            ident = value
        elif name == "event":
            kind = value
        elif name == "data":
            data.append(value)
        elif name == "retry" and value.isdigit():
            yield None, int(value)


__all__ = ["Client", "Event"]
