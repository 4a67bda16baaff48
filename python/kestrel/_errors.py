"""The exceptions the package raises: a failed command or a failed request."""


class KestrelError(Exception):
    """A failure Kestrel reported with its JSON error document.

    `error` is the document's "error" object as Kestrel printed it
    ({"code", "message", "field", "file", "line"}); `code`, `message` and
    `field` are its fields ("" where absent).
    """

    def __init__(self, error, summary=None):
        self.error = dict(error or {})
        self.code = str(self.error.get("code") or "")
        self.message = str(self.error.get("message") or "")
        self.field = str(self.error.get("field") or "")
        super().__init__(summary or self._describe())

    def _describe(self):
        where = f"field '{self.field}': " if self.field else ""
        code = f" ({self.code})" if self.code else ""
        return f"{where}{self.message}{code}"


class CommandError(KestrelError):
    """`kestrel ...` exited non-zero (or printed `"ok": false`).

    `exit_code` is its exit status (2: a usage error, 1: a failed command;
    docs/cli.md), `command` the argument list that was run, `stderr` what it
    wrote there when the Kestrel object captures it (else ""), `document`
    the whole JSON document it printed (None when it printed none).
    """

    def __init__(self, exit_code, error, command, stderr="", document=None, name=""):
        self.exit_code = exit_code
        self.document = document
        self.command = list(command)
        self.stderr = stderr or ""
        super().__init__(error)
        self.args = (f"kestrel {name or ''}".rstrip() + f" exited {exit_code}: {self._describe()}",)


class ApiError(KestrelError):
    """A `kestrel serve` route answered an HTTP error.

    `status` is the HTTP status, `method` and `url` the request.
    """

    def __init__(self, status, error, method, url):
        self.status = status
        self.method = method
        self.url = url
        super().__init__(error)
        self.args = (f"{method} {url}: HTTP {status}: {self._describe()}",)
