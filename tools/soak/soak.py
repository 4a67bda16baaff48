#!/usr/bin/env python3
"""Kestrel soak test: many real training jobs through real workers under faults.

Test tooling only (Python 3 standard library); it drives the real `kestrel`
binary and never imports product code. See docs/soak.md.

    python3 tools/soak/soak.py --kestrel build/src/cli/kestrel --jobs 24
    python3 tools/soak/soak.py --jobs 1000 --store postgres --json report.json
    python3 tools/soak/soak.py --cluster 2 --jobs 20    # hosts: tools/cluster (root)

What it does:
  1. makes a work dir (a Kestrel home, logs, datasets), optionally a private
     PostgreSQL server, and a size-limited tmpfs for the disk-quota fault;
  2. synthesizes and imports a tiny dataset (imgsz 64);
  3. starts W `kestrel worker` processes with small supervision timings and
     restarts any that exit (like systemd would);
  4. submits N valid jobs (tiny model, a few seconds each), keeping a bounded
     number live, while a seeded fault injector fires one fault at a time;
  5. drains (waits for every job to reach a final state, with a timeout),
     collects every job and attempt through `kestrel jobs list/show --json`,
     and checks the invariants: availability over valid jobs, none lost,
     none stuck, no duplicate committed results, every invalid input
     rejected with a clear class. Exit 0 when all hold, 1 otherwise,
     2 on a setup error.

With --cluster N the workers run on N hosts of tools/cluster/cluster.sh
(network namespaces sharing the cluster's PostgreSQL and Swift S3 store, so
a job resumes on another host from its S3 checkpoint), and the host faults
come on top: a cut link, a frozen host, a power-off, an S3 restart (the
store restart is the cluster's PostgreSQL, the full disk a host's disk).
Where the cluster cannot be made it prints "SKIP: why" and exits 77.
"""

import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

FAULTS = [
    "kill_trainer",     # SIGKILL a running `kestrel train` child
    "kill_worker",      # SIGKILL a whole `kestrel worker` (its child is orphaned)
    "hang_trainer",     # SIGSTOP a running child: the supervisor must see no progress
    "restart_store",    # PostgreSQL: stop + start the server; SQLite: kill all workers at once
    "corrupt_dataset",  # a dataset copy with a corrupted image/label, or a corrupted blob
    "nan_config",       # submit lr0=1e6 (must be refused: bad_config)
    "disk_full",        # fill the size-limited runs folder while jobs checkpoint
    "dup_submit",       # submit the same job ten times at once
]
# --cluster only (tools/cluster/cluster.sh's host faults)
CLUSTER_FAULTS = [
    "cut_link",         # a host's link down for a while, then up (it comes back: fencing)
    "freeze_host",      # SIGSTOP every process of a host, SIGCONT later (it comes back)
    "poweroff_host",    # SIGKILL every process of a host; its worker restarts later (a reboot)
    "restart_s3",       # the S3 proxy killed and started again
]
VICTIM_FAULTS = ("kill_trainer", "kill_worker", "hang_trainer", "restart_store", "disk_full",
                 "cut_link", "freeze_host", "poweroff_host", "restart_s3")
LIVE = ("queued", "running", "failed_retryable")
FINAL = ("succeeded", "failed_permanent", "cancelled")


def now_ms():
    return int(time.time() * 1000)


def log(msg):
    sys.stderr.write("[soak %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


class SetupError(Exception):
    pass


class Unsupported(Exception):
    """The binary cannot run supervised jobs at all, or --cluster cannot make its
    hosts here (exit 77 after "SKIP: why": CTest SKIP_RETURN_CODE)."""


# --------------------------------------------------------------------------
# The kestrel CLI


class Kestrel:
    def __init__(self, binary, env, calls_log):
        self.binary = binary
        self.env = env
        self.calls_log = calls_log
        self.lock = threading.Lock()
        self.count = 0

    def run(self, args, timeout=120, stdin=None):
        """One call: (rc, stdout, stderr). rc -9 on timeout."""
        with self.lock:
            self.count += 1
        try:
            p = subprocess.run([self.binary] + list(args), env=self.env, capture_output=True,
                               text=True, timeout=timeout, input=stdin)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = -9, e.stdout or "", "timeout after %ss" % timeout
            if isinstance(out, bytes):
                out = out.decode("utf-8", "replace")
        if rc != 0 and self.calls_log:
            with self.lock, open(self.calls_log, "a") as f:
                f.write("%d rc=%d kestrel %s\n%s\n" % (now_ms(), rc, " ".join(args), (err or "")[-2000:]))
        return rc, out, err

    def json(self, args, deadline_s=90, timeout=120):
        """A --json call retried on transient failures (store restarting...).
        Returns the parsed document, or raises RuntimeError after deadline_s."""
        end = time.time() + deadline_s
        delay = 0.5
        last = None
        while True:
            rc, out, err = self.run(list(args) + ["--json"], timeout=timeout)
            if rc == 0:
                try:
                    return json.loads(out)
                except ValueError:
                    last = "bad JSON: %r" % out[:200]
            else:
                last = "rc=%d %s" % (rc, (err or out).strip()[-400:])
                if rc == 2:
                    raise RuntimeError("kestrel %s: %s" % (" ".join(args), last))
            if time.time() > end:
                raise RuntimeError("kestrel %s: %s" % (" ".join(args), last))
            time.sleep(delay)
            delay = min(delay * 2, 4)


# --------------------------------------------------------------------------
# Stores


class SqliteStore:
    kind = "sqlite"

    def env(self):
        return {}

    def can_restart(self):
        return False

    def stop(self):
        pass


class PostgresStore:
    kind = "postgres"

    def __init__(self, root):
        self.root = root
        script = os.path.join(root, "scripts", "pg-test-server.sh")
        p = subprocess.run([script, "start"], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise SetupError("pg-test-server.sh start failed: %s" % p.stderr[-2000:])
        kv = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
        self.url = kv.get("KESTREL_TEST_PG")
        self.dir = kv.get("KESTREL_PG_TEST_DIR")
        if not self.url or not self.dir:
            raise SetupError("pg-test-server.sh printed no URL: %s" % p.stdout)
        self.bin = open(os.path.join(self.dir, "bin")).read().strip()
        self.owner = open(os.path.join(self.dir, "owner")).read().strip()
        self.port = open(os.path.join(self.dir, "port")).read().strip()
        log("postgres on port %s (%s)" % (self.port, self.dir))

    def env(self):
        return {"KESTREL_DB": self.url}

    def can_restart(self):
        return True

    def _ctl(self, *args):
        cmd = [os.path.join(self.bin, "pg_ctl")] + list(args)
        if os.getuid() == 0:
            cmd = ["runuser", "-u", self.owner, "--"] + cmd
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def stop_server(self, mode):
        return self._ctl("-D", os.path.join(self.dir, "data"), "-m", mode, "-w", "stop")

    def start_server(self):
        opts = ("-c listen_addresses=127.0.0.1 -p %s -k %s -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=300" % (self.port, self.dir))
        return self._ctl("-D", os.path.join(self.dir, "data"), "-l", os.path.join(self.dir, "server.log"),
                         "-w", "-t", "60", "-o", opts, "start")

    def stop(self):
        script = os.path.join(self.root, "scripts", "pg-test-server.sh")
        subprocess.run([script, "stop", self.dir], capture_output=True, text=True, timeout=120)


class Cluster:
    """tools/cluster/cluster.sh: N worker hosts h1..hN (network namespaces on a
    bridge), PostgreSQL on host db, the Swift S3 store on host s3. The soak
    itself (its CLI calls: submit, list, stats) runs in the root namespace and
    reaches both servers over the bridge; workers run inside their hosts."""

    kind = "postgres"

    def __init__(self, root, state, hosts, kestrel, disk_mb):
        self.script = os.path.join(root, "tools", "cluster", "cluster.sh")
        self.state = state
        self.hosts = ["h%d" % (i + 1) for i in range(hosts)]
        self.kestrel = kestrel
        self.disk_mb = disk_mb
        self.is_up = False
        self.cfg = {}
        self.vars = {}

    def _env(self):
        e = dict(os.environ)
        e["KESTREL"] = self.kestrel
        e["CLUSTER_DISK_MB"] = str(self.disk_mb)
        return e

    def up(self):
        os.makedirs(self.state, exist_ok=True)
        out = os.path.join(os.path.dirname(self.state), "cluster-up.log")
        # Output to a file, not a pipe: the servers it starts in the background
        # would hold a pipe open.
        with open(out, "w") as f:
            p = subprocess.run([self.script, "up", self.state, str(len(self.hosts))], env=self._env(),
                               stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=300)
        text = open(out).read()
        skip = [l for l in text.splitlines() if l.startswith("SKIP:")]
        if skip:
            raise Unsupported(skip[0][len("SKIP:"):].strip())
        if p.returncode != 0:
            raise SetupError("cluster.sh up failed rc=%d: %s" % (p.returncode, text[-2000:]))
        self.is_up = True
        for h in self.hosts:
            os.chmod(self.home(h), 0o700)   # a home is private (the worker warns otherwise)
        self.cfg = dict(l.strip().split("=", 1) for l in open(os.path.join(self.state, "cluster")) if "=" in l)
        self.vars = dict(l.strip().split("=", 1) for l in open(os.path.join(self.state, "env")) if "=" in l)
        log("cluster %s up: %d worker hosts, %s, %s" % (self.cfg.get("ID"), len(self.hosts),
                                                      self.vars.get("KESTREL_DB"), self.vars.get("KESTREL_ARTIFACTS")))

    def env(self):
        """What every program of the cluster gets (KESTREL_DB, KESTREL_ARTIFACTS, AWS_*)."""
        return dict(self.vars)

    def home(self, host):
        return os.path.join(self.state, host, "home")

    def netns(self, host):
        return "%s-%s" % (self.cfg["ID"], host)   # cluster.sh's naming: "<id>-<host>"

    def fault(self, verb, host=None, timeout=120):
        """cluster.sh VERB STATE [HOST]: (rc, output). Output through a file:
        a server it restarts in the background must not hold our pipe."""
        args = [self.script, verb, self.state] + ([host] if host else [])
        with tempfile.TemporaryFile("w+") as f:
            try:
                rc = subprocess.run(args, env=self._env(), stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                rc = -9
            f.seek(0)
            return rc, f.read()[-1000:]

    def put_object(self, key, body):
        """PUT `body` at `key` of the cluster's bucket, signed with SigV4 (a
        fault: bit rot written behind the store's back)."""
        import datetime
        import hmac
        import urllib.request
        v = self.vars
        bucket = v["KESTREL_ARTIFACTS"][len("s3://"):].split("/", 1)[0]
        endpoint = v["AWS_ENDPOINT_URL"].rstrip("/")
        region = v.get("AWS_REGION", "us-east-1")
        host = endpoint.split("://", 1)[1]
        path = "/%s/%s" % (bucket, key)
        t = datetime.datetime.now(datetime.timezone.utc)
        amz, day = t.strftime("%Y%m%dT%H%M%SZ"), t.strftime("%Y%m%d")
        digest = hashlib.sha256(body).hexdigest()
        signed = "host;x-amz-content-sha256;x-amz-date"
        canon = "PUT\n%s\n\nhost:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n\n%s\n%s" % (
            path, host, digest, amz, signed, digest)
        scope = "%s/%s/s3/aws4_request" % (day, region)
        sts = "AWS4-HMAC-SHA256\n%s\n%s\n%s" % (amz, scope, hashlib.sha256(canon.encode()).hexdigest())
        k = ("AWS4" + v["AWS_SECRET_ACCESS_KEY"]).encode()
        for part in (day, region, "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        auth = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
            v["AWS_ACCESS_KEY_ID"], scope, signed, sig)
        req = urllib.request.Request(endpoint + path, method="PUT", data=body, headers={
            "x-amz-date": amz, "x-amz-content-sha256": digest, "Authorization": auth})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status

    def keep_logs(self, dest):
        """Copies the hosts' attempt logs (on their tmpfs disks, gone at teardown)."""
        for h in self.hosts:
            src = os.path.join(self.home(h), "jobs")
            for root, _, files in os.walk(src):
                for f in files:
                    if f.endswith(".log"):
                        rel = os.path.relpath(os.path.join(root, f), src)
                        to = os.path.join(dest, h + "-jobs", rel)
                        os.makedirs(os.path.dirname(to), exist_ok=True)
                        try:
                            shutil.copyfile(os.path.join(root, f), to)
                        except OSError:
                            pass

    def down(self):
        if self.is_up:
            p = subprocess.run([self.script, "down", self.state], env=self._env(), capture_output=True,
                               text=True, timeout=180, stdin=subprocess.DEVNULL)
            if p.returncode != 0:
                log("cluster.sh down rc=%d: %s" % (p.returncode, p.stderr[-500:]))
            self.is_up = False


# --------------------------------------------------------------------------
# Processes


def _die_with_parent():
    """preexec_fn: SIGTERM the worker when the soak dies (a CTest timeout, kill -9),
    so no worker outlives its soak; the worker then stops its own children."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None


def proc_environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(kv.decode("utf-8", "replace").split("=", 1)
                        for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return None


def proc_stat(pid):
    """(state letter, ppid) or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        rest = s[s.rindex(")") + 2:].split()
        return rest[0], int(rest[1])
    except (OSError, ValueError, IndexError):
        return None


def our_trainers(homes, only=None):
    """{pid: (job, attempt, state, ppid, host)} for `kestrel train --job` processes of
    these homes ({home: host}: one for a local soak, one per host on a cluster;
    the hosts' namespaces share the pid space, so /proc sees them all)."""
    out = {}
    for d in ([str(only)] if only else os.listdir("/proc")):
        if not d.isdigit():
            continue
        pid = int(d)
        cmd = proc_cmdline(pid)
        if not cmd or "train" not in cmd or "--job" not in cmd:
            continue
        if not any(os.path.basename(c).startswith("kestrel") for c in cmd[:cmd.index("train")]):
            continue
        env = proc_environ(pid)
        if env is None:
            continue
        home = env.get("KESTREL_HOME")
        if "--home" in cmd:   # the worker passes the home explicitly
            i = cmd.index("--home")
            home = os.path.abspath(cmd[i + 1]) if i + 1 < len(cmd) else None
        if home not in homes:
            continue
        st = proc_stat(pid)
        if st is None or st[0] == "Z":
            continue
        try:
            job = int(cmd[cmd.index("--job") + 1])
            att = int(cmd[cmd.index("--attempt") + 1]) if "--attempt" in cmd else -1
        except (ValueError, IndexError):
            continue
        out[pid] = (job, att, st[0], st[1], homes[home])
    return out


class Workers:
    """W `kestrel worker` processes, restarted when they exit (like systemd)."""

    def __init__(self, opts, kestrel, logdir, rec, cluster=None):
        self.opts = opts
        self.k = kestrel
        self.logdir = logdir
        self.rec = rec
        self.cluster = cluster   # worker i runs on host h<i+1> of the cluster
        self.procs = {}
        self.expected_exit = set()
        self.paused_until = {}
        self.lock = threading.Lock()
        self.stopping = False
        self.starts = collections.Counter()

    def host(self, i):
        return "h%d" % (i + 1) if self.cluster else "local"

    def index(self, host):
        return int(host[1:]) - 1 if self.cluster else 0

    def args(self, i):
        o = self.opts
        a = ["worker", "--slots", str(o.slots), "--id", ("soak-%s" % self.host(i)) if self.cluster else ("soak-w%d" % i),
             "--heartbeat-s", str(o.heartbeat_s), "--hang-timeout-s", str(o.hang_timeout_s),
             "--lease-s", str(o.lease_s), "--grace-s", str(o.grace_s), "--poll-s", str(o.poll_s)]
        if self.cluster:
            # a host's disk is a small tmpfs (cluster.sh), below the default watermark
            a += ["--min-free-gb", str(o.min_free_gb), "--no-webhooks"]
            # namespaces share the machine's hostname: name the host, so its
            # environment failures and quarantine are its own, not every host's
            a += ["--host", self.host(i)]
        return a + list(o.worker_arg)

    def spawn(self, i):
        f = open(os.path.join(self.logdir, "worker-%d.log" % i), "a")
        f.write("\n=== %d start\n" % now_ms())
        f.flush()
        cmd, env, cwd = [self.k.binary] + self.args(i), self.k.env, None
        if self.cluster:
            # `ip netns exec` execs the worker in the host's namespace: the pid is the worker's
            h = self.host(i)
            cmd = ["ip", "netns", "exec", self.cluster.netns(h)] + cmd
            env = dict(self.k.env)
            env.update(self.cluster.env())
            env["KESTREL_HOME"] = self.cluster.home(h)
            env["KESTREL_S3_CACHE_GB"] = str(self.opts.s3_cache_gb)
            cwd = os.path.dirname(self.cluster.home(h))
        p = subprocess.Popen(cmd, env=env, stdout=f, cwd=cwd,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                             preexec_fn=_die_with_parent)
        f.close()
        self.procs[i] = p
        self.starts[i] += 1

    def start(self):
        with self.lock:
            for i in range(self.opts.workers):
                self.spawn(i)

    def pids(self):
        with self.lock:
            return {i: p.pid for i, p in self.procs.items() if p.poll() is None}

    def kill(self, i, sig=signal.SIGKILL, restart_after=1.0):
        with self.lock:
            p = self.procs.get(i)
            if p is None or p.poll() is not None:
                return None
            self.expected_exit.add(p.pid)
            self.paused_until[i] = time.time() + restart_after
            os.kill(p.pid, sig)
            return p.pid

    def expect_down(self, i, restart_after):
        """Worker i is about to die of a fault done elsewhere (a power-off):
        not a finding; restart it after `restart_after` s (the reboot)."""
        with self.lock:
            p = self.procs.get(i)
            if p is None or p.poll() is not None:
                return None
            self.expected_exit.add(p.pid)
            self.paused_until[i] = time.time() + restart_after
            return p.pid

    def supervise_once(self):
        with self.lock:
            if self.stopping:
                return
            for i, p in list(self.procs.items()):
                rc = p.poll()
                if rc is None:
                    continue
                if time.time() < self.paused_until.get(i, 0):
                    continue
                if p.pid in self.expected_exit:
                    self.expected_exit.discard(p.pid)
                else:
                    self.rec.event("worker_exit_unexpected", worker=i, pid=p.pid, rc=rc)
                    log("worker %d (pid %d) exited by itself rc=%s; restarting" % (i, p.pid, rc))
                self.spawn(i)

    def stop_all(self, grace=15):
        with self.lock:
            self.stopping = True
            procs = list(self.procs.values())
        for p in procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except OSError:
                    pass
        end = time.time() + grace
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# --------------------------------------------------------------------------
# Records


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.faults = []          # fault records (dicts)
        self.events = []          # findings / notable events
        self.valid = {}           # job_id -> submission record
        self.invalid = []         # rejected / invalid submissions
        self.groups = []          # dup_submit groups
        self.submit_retries = 0
        self.submit_gave_up = []
        self.breaker_opened = 0
        self.breaker_resets = 0
        self.breaker_reasons = collections.Counter()
        self.hits = collections.Counter()   # job -> faults aimed at it

    def event(self, kind, **kw):
        with self.lock:
            e = dict(kind=kind, t_ms=now_ms(), **kw)
            self.events.append(e)
            return e

    def fault(self, rec):
        with self.lock:
            self.faults.append(rec)
            return rec


# --------------------------------------------------------------------------
# The soak


class Soak:
    def __init__(self, opts):
        self.o = opts
        self.rng = random.Random(opts.seed)
        self.rec = Recorder()
        self.stop_evt = threading.Event()
        self.submit_done = threading.Event()
        # SIGUSR1: stop submitting now, then drain, check and report as usual
        # (a long run ended early on purpose keeps its report).
        self.finish_evt = threading.Event()
        self.snapshot = {}       # job id -> job dict from the latest `jobs list`
        self.snapshot_ms = 0
        self.snap_lock = threading.Lock()
        self.root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.mounted = None
        self.quota_skip = None
        self.store = None
        self.cluster = None
        self.homes = {}          # home -> host whose trainers the soak may hit
        self.workers = None
        self.seed_counter = 0
        self.seed_lock = threading.Lock()
        self.ds_counter = 0
        self.last_progress = time.time()

    # ---- setup

    def setup(self):
        o = self.o
        self.work = o.workdir or tempfile.mkdtemp(prefix="kestrel-soak.")
        os.makedirs(self.work, exist_ok=True)
        self.home = os.path.join(self.work, "home")
        self.logs = os.path.join(self.work, "logs")
        self.data = os.path.join(self.work, "data")
        for d in (self.home, self.logs, self.data):
            os.makedirs(d, exist_ok=True)
        log("work dir %s" % self.work)
        if o.cluster:
            os.chmod(self.work, 0o755)   # the postgres user reads its data folder under it
            # every host's disk is its own tmpfs already (cluster.sh): no quota mount
            self.cluster = Cluster(self.root, os.path.join(self.work, "cluster"), o.cluster, o.kestrel,
                                   o.host_disk_mb)
            self.store = self.cluster
            self.cluster.up()
            self.homes = {self.cluster.home(h): h for h in self.cluster.hosts}
        else:
            self.homes = {self.home: "local"}
        if "disk_full" in o.faults and not o.cluster:
            self.mount_quota()
        if not o.cluster:
            self.store = PostgresStore(self.root) if o.store == "postgres" else SqliteStore()
        env = dict(os.environ)
        env.pop("KESTREL_DB", None)
        env["KESTREL_HOME"] = self.home
        env.update(self.store.env())
        self.k = Kestrel(o.kestrel, env, os.path.join(self.logs, "cli-errors.log"))
        rc, out, err = self.k.run(["--version"], timeout=60)
        if rc != 0:
            raise SetupError("kestrel --version failed: %s" % err)
        self.version = out.strip()
        for cmd, needle in ((["train", "--help"], "--job"), (["worker", "--help"], "--lease-s"),
                            (["submit", "--help"], "key=value")):
            rc, out, err = self.k.run(cmd, timeout=60)
            if needle not in out + err:
                raise Unsupported("`kestrel %s` has no %s: this build cannot run supervised jobs"
                                  % (" ".join(cmd), needle))
        self.make_dataset("soak", seed=o.seed, images=o.images)
        self.workers = Workers(o, self.k, self.logs, self.rec, cluster=self.cluster)

    def mount_quota(self):
        o = self.o
        target = os.path.normpath(os.path.join(self.home, o.quota_dir))
        os.makedirs(target, exist_ok=True)
        if os.geteuid() != 0:
            self.quota_skip = "not root, cannot mount a size-limited tmpfs"
            return
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % o.quota_mb, "soak-quota", target],
                           capture_output=True, text=True)
        if p.returncode != 0:
            self.quota_skip = "mount tmpfs failed: %s" % p.stderr.strip()
            log("disk_full will be skipped: %s" % self.quota_skip)
            return
        self.mounted = target
        log("tmpfs quota of %d MiB on %s" % (o.quota_mb, target))

    def make_dataset(self, name, seed, images, corrupt=None, allow_errors=False):
        """synth + import. Returns (rc, import JSON or error text)."""
        src = os.path.join(self.data, name)
        if not os.path.isdir(src):
            rc, out, err = self.k.run(["dataset", "synth", src, "--images", str(images), "--classes", "2",
                                       "--imgsz", "64", "--seed", str(seed)], timeout=300)
            if rc != 0:
                raise SetupError("dataset synth failed: %s" % err)
        if corrupt:
            corrupt(src)
        args = ["dataset", "import", src, "--name", name, "--json"]
        if allow_errors:
            args.append("--allow-errors")
        for _ in range(20):
            rc, out, err = self.k.run(args, timeout=300)
            try:
                doc = json.loads(out) if out.strip() else None
            except ValueError:
                doc = None
            if rc == 0 or (doc is not None and rc == 1):
                return rc, doc if doc is not None else out
            if rc == 2:
                break
            time.sleep(1)   # transient (store restarting, disk full): try again
        if name == "soak":
            raise SetupError("dataset import failed rc=%d: %s" % (rc, (err or out)[-1000:]))
        return rc, (err or out)

    # ---- submission

    def next_seed(self):
        with self.seed_lock:
            self.seed_counter += 1
            return self.o.seed * 100000 + self.seed_counter

    def job_spec(self, data="soak", **extra):
        o = self.o
        spec = {
            "data": data, "model": o.model, "epochs": str(o.epochs), "imgsz": "64", "batch": "8",
            "workers": "1", "threads": "1", "plots": "false", "seed": str(self.next_seed()),
            "priority": self.rng.choice(["high", "normal", "normal", "low"]),
            "max_retries": str(o.max_retries), "backoff": o.backoff, "time_limit": str(o.time_limit_s),
        }
        spec.update({k: str(v) for k, v in extra.items()})
        return spec

    def submit(self, spec, deadline_s=None):
        """Submit, retrying transient errors (idempotent thanks to the dedup key).
        Returns (doc | None, rc, message, tries)."""
        args = ["submit"] + ["%s=%s" % kv for kv in spec.items()] + ["--json"]
        end = time.time() + (deadline_s or self.o.submit_deadline_s)
        tries = 0
        delay = 0.5
        while True:
            tries += 1
            rc, out, err = self.k.run(args, timeout=120)
            if rc == 0:
                try:
                    doc = json.loads(out)
                    if doc.get("ok") and "job_id" in doc:
                        return doc, 0, "", tries
                except ValueError:
                    pass
            if rc == 2:
                return None, 2, (err or out).strip(), tries
            if time.time() > end:
                return None, rc, (err or out).strip(), tries
            with self.rec.lock:
                self.rec.submit_retries += 1
            time.sleep(delay)
            delay = min(delay * 2, 4)

    def add_valid(self, doc, spec, how, **kw):
        jid = doc["job_id"]
        with self.rec.lock:
            if jid not in self.rec.valid:
                self.rec.valid[jid] = dict(job_id=jid, spec=spec, how=how, created=doc.get("created"),
                                           dedup_key=doc.get("dedup_key"), submitted_ms=now_ms(), **kw)
        return jid

    def submitter(self):
        o = self.o
        t_end = self.t0 + o.duration_s
        n = 0
        while n < o.jobs and not self.stop_evt.is_set():
            if time.time() > t_end:
                self.rec.event("duration_reached", submitted=n)
                log("--duration reached after %d jobs; draining" % n)
                break
            if self.finish_evt.is_set():
                self.rec.event("finish_requested", submitted=n)
                log("SIGUSR1: stop submitting after %d jobs; draining" % n)
                break
            if self.live_count() >= o.max_live:
                if time.time() - self.last_progress > o.stall_timeout_s:
                    self.rec.event("stalled", submitted=n, after_s=o.stall_timeout_s)
                    log("no job changed state for %d s; stop submitting and drain" % o.stall_timeout_s)
                    break
                time.sleep(0.5)
                continue
            spec = self.job_spec()
            doc, rc, msg, tries = self.submit(spec)
            if doc is None:
                with self.rec.lock:
                    self.rec.submit_gave_up.append(dict(spec=spec, rc=rc, message=msg[-500:]))
                log("submit gave up rc=%d: %s" % (rc, msg[-200:]))
            else:
                self.add_valid(doc, spec, "submit", tries=tries)
            n += 1
            if n % 25 == 0:
                log("submitted %d/%d" % (n, o.jobs))
        self.submit_done.set()

    def live_count(self):
        with self.snap_lock:
            snap = dict(self.snapshot)
        with self.rec.lock:
            ids = list(self.rec.valid)
        # jobs submitted after the last snapshot count as live
        return sum(1 for j in ids if j not in snap or snap[j]["state"] in LIVE)

    # ---- monitor

    def prune(self, job):
        """Disk housekeeping for a finished job (the soak, not the product): drop its
        resume checkpoints (--prune ckpt) or, after checking that the committed
        result's best weights exist, everything but the attempt logs (--prune run)."""
        ds = [os.path.join(h, "jobs", str(job["id"])) for h in self.homes]
        ds = [d for d in ds if os.path.isdir(d)]
        if not ds:
            return
        if self.o.prune == "run" and job["state"] == "succeeded":
            best = (job.get("result") or {}).get("best")
            if not best or not os.path.isfile(best) or os.path.getsize(best) == 0:
                self.rec.event("result_missing_at_finish", job=job["id"], best=best)
        for root, dirs, files in (w for d in ds for w in os.walk(d)):
            for f in files:
                if f.endswith(".log"):
                    continue
                if self.o.prune == "ckpt" and not f.endswith(".ckpt"):
                    continue
                try:
                    os.unlink(os.path.join(root, f))
                except OSError:
                    pass

    def monitor(self):
        last_stats = 0
        breaker_open_since = None
        pruned = set()
        while not self.stop_evt.is_set():
            try:
                self.monitor_once(pruned)
            except Exception as e:  # a dead monitor restarts no worker and the soak hangs
                self.rec.event("monitor_error", error=repr(e)[:300])
                log("monitor: %r (continuing)" % (e,))
            if time.time() - last_stats > self.o.stats_every_s:
                last_stats = time.time()
                try:
                    breaker_open_since = self.check_breaker(breaker_open_since)
                except Exception as e:
                    self.rec.event("monitor_error", error=repr(e)[:300])
                    log("monitor (stats): %r (continuing)" % (e,))
            self.stop_evt.wait(self.o.monitor_every_s)

    def monitor_once(self, pruned):
        self.workers.supervise_once()
        try:
            doc = self.k.json(["jobs", "list", "--limit", "100000000"], deadline_s=5)
            new = {j["id"]: j for j in doc.get("jobs", [])}
            with self.snap_lock:
                old = self.snapshot
                self.snapshot = new
                self.snapshot_ms = now_ms()
            if any(j not in old or old[j]["state"] != v["state"] or old[j]["attempt"] != v["attempt"]
                   for j, v in new.items()):
                self.last_progress = time.time()
            if self.o.prune != "none":
                for j in doc.get("jobs", []):
                    if j["state"] in FINAL and j["id"] not in pruned:
                        pruned.add(j["id"])
                        self.prune(j)
        except RuntimeError:
            pass

    def check_breaker(self, breaker_open_since):
        try:
            st = self.k.json(["stats"], deadline_s=5)
            br = st.get("breaker") or {}
            if br.get("open"):
                if breaker_open_since is None:
                    breaker_open_since = time.time()
                    with self.rec.lock:
                        self.rec.breaker_opened += 1
                        self.rec.breaker_reasons[str(br.get("reason"))[:120]] += 1
                    self.rec.event("breaker_open", reason=br.get("reason"))
                    log("breaker open: %s" % br.get("reason"))
                if (self.o.breaker == "reset"
                        and time.time() - breaker_open_since >= self.o.breaker_reset_after_s):
                    rc, _, _ = self.k.run(["breaker", "reset"])
                    if rc == 0:
                        with self.rec.lock:
                            self.rec.breaker_resets += 1
                        self.rec.event("breaker_reset")
                        breaker_open_since = None
            else:
                breaker_open_since = None
        except RuntimeError:
            pass
        return breaker_open_since

    # ---- victims

    def running_attempts(self):
        """[(job, attempt, pid, state, worker_pid, host)] of live trainer children of
        the soak's homes, cross-checked with the store's running jobs."""
        trainers = our_trainers(self.homes)
        if not trainers:
            return []   # no store round trip (a CLI start-up, seconds on a loaded box) for nothing
        try:
            doc = self.k.json(["jobs", "list", "--state", "running", "--limit", "100000"], deadline_s=10)
            running = {j["id"]: j for j in doc.get("jobs", [])}
        except RuntimeError:
            running = {}
        out = []
        for pid, (job, att, state, ppid, host) in trainers.items():
            j = running.get(job)
            if j is None or (att >= 0 and j.get("attempt") not in (None, att)):
                continue
            if state == "T":
                continue   # already stopped (a hang fault in progress)
            out.append((job, att, pid, state, ppid, host))
        return out

    def pick_victim(self, cands):
        """Prefer jobs hit least, never a job past its fault allowance (so faults
        alone cannot exhaust a retry budget of a valid job)."""
        with self.rec.lock:
            cands = [c for c in cands if self.rec.hits[c[0]] < self.o.max_hits_per_job]
            if not cands:
                return None
            low = min(self.rec.hits[c[0]] for c in cands)
            cands = [c for c in cands if self.rec.hits[c[0]] == low]
        return self.rng.choice(sorted(cands))

    def wait_for_victims(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end and not self.stop_evt.is_set():
            c = self.running_attempts()
            if c:
                return c
            time.sleep(0.3)
        return []

    @staticmethod
    def victims(cands):
        return [dict(job=c[0], attempt=c[1], pid=c[2], host=c[5]) for c in cands]

    def confirm_pid(self, pid, job):
        t = our_trainers(self.homes, only=pid)
        return pid in t and t[pid][0] == job

    # ---- faults

    def signal_trainer(self, rec, sig):
        """Sends `sig` to one running trainer; returns (result, pid, job)."""
        v = self.pick_victim(self.wait_for_victims())
        if v is None:
            return "skipped: no running attempt", None, None
        job, att, pid, _, _, host = v
        if not self.confirm_pid(pid, job):
            return "skipped: victim exited", None, None
        rec["t_inject_ms"] = now_ms()
        os.kill(pid, sig)
        rec["victims"] = [dict(job=job, attempt=att, pid=pid, host=host)]
        with self.rec.lock:
            self.rec.hits[job] += 1
        return "ok", pid, job

    def f_kill_trainer(self, rec):
        return self.signal_trainer(rec, signal.SIGKILL)[0]

    def f_hang_trainer(self, rec):
        res, pid, job = self.signal_trainer(rec, signal.SIGSTOP)
        if res != "ok":
            return res
        # the supervisor must notice (no progress for hang_timeout) and stop it
        limit = self.o.hang_timeout_s + self.o.grace_s + self.o.heartbeat_s + 15
        t = threading.Thread(target=self.watch_hang, args=(pid, job, limit), daemon=True)
        t.start()
        return "ok"

    def watch_hang(self, pid, job, limit):
        end = time.time() + limit
        while time.time() < end:
            st = proc_stat(pid)
            if st is None or st[0] == "Z":
                return
            time.sleep(1)
        st = proc_stat(pid)
        if st is not None and st[0] != "Z" and self.confirm_pid(pid, job):
            self.rec.event("hang_not_detected", job=job, pid=pid, after_s=limit, state=st[0])
            log("BUG? stopped trainer pid %d of job %d still alive after %ds" % (pid, job, limit))

    def f_kill_worker(self, rec):
        cands = self.wait_for_victims()
        wpids = self.workers.pids()
        by_pid = {p: i for i, p in wpids.items()}
        cands = [c for c in cands if c[4] in by_pid]
        v = self.pick_victim(cands)
        if v is None:
            return "skipped: no worker with a running attempt"
        wpid = v[4]
        i = by_pid[wpid]
        orphans = [c for c in cands if c[4] == wpid]
        rec["t_inject_ms"] = now_ms()
        if self.workers.kill(i, restart_after=self.o.worker_restart_s) is None:
            return "skipped: worker exited"
        rec["worker"] = i
        rec["victims"] = self.victims(orphans)
        with self.rec.lock:
            for c in orphans:
                self.rec.hits[c[0]] += 1
        t = threading.Thread(target=self.watch_orphans, args=(orphans,), daemon=True)
        t.start()
        return "ok"

    def watch_orphans(self, orphans):
        """A trainer whose worker died must not outlive the lease by much (it
        cannot renew; a new attempt may already run)."""
        limit = self.o.lease_s + self.o.grace_s + 20
        time.sleep(limit)
        for job, att, pid, _, _, _ in orphans:
            st = proc_stat(pid)
            if st is not None and st[0] != "Z" and self.confirm_pid(pid, job):
                self.rec.event("orphan_trainer_alive", job=job, attempt=att, pid=pid, after_s=limit)
                log("orphaned trainer pid %d (job %d attempt %d) still alive %ds after its worker died"
                    % (pid, job, att, limit))

    def f_restart_store(self, rec):
        cands = self.running_attempts()
        rec["victims"] = self.victims(cands)
        if self.cluster:
            # the cluster's PostgreSQL on host db: fast stop, start (cluster.sh restart-pg)
            rec["t_inject_ms"] = now_ms()
            rc, out = self.cluster.fault("restart-pg")
            rec["t_back_ms"] = now_ms()
            rec["variant"] = "cluster restart-pg (stop -m fast, start)"
            if rc != 0:
                return "failed: cluster.sh restart-pg rc=%d: %s" % (rc, out[-300:])
        elif self.store.can_restart():
            mode = self.rng.choice(["fast", "immediate"])
            down = self.rng.uniform(1, self.o.store_down_max_s)
            rec["t_inject_ms"] = now_ms()
            p = self.store.stop_server(mode)
            if p.returncode != 0:
                return "failed: pg_ctl stop: %s" % p.stderr[-300:]
            time.sleep(down)
            p = self.store.start_server()
            rec["t_back_ms"] = now_ms()
            rec["variant"] = "postgres stop -m %s, %.1f s down" % (mode, down)
            if p.returncode != 0:
                return "failed: pg_ctl start: %s" % p.stderr[-300:]
        else:
            rec["t_inject_ms"] = now_ms()
            for i in list(self.workers.pids()):
                self.workers.kill(i, restart_after=self.o.worker_restart_s)
            rec["t_back_ms"] = now_ms() + int(self.o.worker_restart_s * 1000)
            rec["variant"] = "sqlite: SIGKILL every worker at once, restart after %.1f s" % self.o.worker_restart_s
            threading.Thread(target=self.watch_orphans, args=(cands,), daemon=True).start()
        with self.rec.lock:
            for c in cands:
                self.rec.hits[c[0]] += 1
        return "ok"

    def f_corrupt_dataset(self, rec):
        self.ds_counter += 1
        n = self.ds_counter
        variant = "import" if n % 2 == 1 else "blob"
        rec["variant"] = variant
        rec["t_inject_ms"] = now_ms()
        if variant == "import":
            name = "soak_bad%d" % n

            def corrupt(src):
                imgs = sorted(os.listdir(os.path.join(src, "images", "train")))
                with open(os.path.join(src, "images", "train", imgs[1]), "r+b") as f:
                    f.seek(0)
                    f.write(b"\x00garbage, not a JPEG" * 4)
                    f.truncate(200)
                lbl = os.path.join(src, "labels", "train", os.path.splitext(imgs[2])[0] + ".txt")
                with open(lbl, "w") as f:
                    f.write("0 0.5 0.5 nan 0.2\n7 1.5 0.5 0.1\n")
                rec["corrupted"] = [imgs[1], os.path.basename(lbl)]

            rc, doc = self.make_dataset(name, seed=self.o.seed * 1000 + n, images=self.o.images,
                                        corrupt=corrupt)
            errors = doc.get("report", {}).get("errors") if isinstance(doc, dict) else None
            cls = "dataset_errors" if (rc == 1 and errors) else ("accepted" if rc == 0 else "rc=%d" % rc)
            with self.rec.lock:
                self.rec.invalid.append(dict(kind="corrupt_dataset_import", dataset=name, rc=rc,
                                             expected="dataset_errors", got=cls, errors=errors,
                                             message="" if isinstance(doc, dict) else str(doc)[-300:]))
            if cls != "dataset_errors":
                return "unexpected: import of a corrupted copy gave %s" % cls
            # with --allow-errors the bad samples are excluded and the rest trains
            rc, doc = self.make_dataset(name, seed=0, images=0, allow_errors=True)
            if rc != 0:
                return "failed: --allow-errors import rc=%d" % rc
            excluded = doc.get("report", {}).get("images_excluded") if isinstance(doc, dict) else None
            rec["excluded"] = excluded
            spec = self.job_spec(data=name)
        else:
            name = "soak_blob%d" % n
            rc, doc = self.make_dataset(name, seed=self.o.seed * 1000 + n, images=self.o.images)
            if rc != 0:
                return "failed: import rc=%d" % rc
            src = os.path.join(self.data, name, "images", "train")
            img = sorted(os.listdir(src))[1]
            with open(os.path.join(src, img), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            garbage = b"\xff\xd8\xff\x00corrupted blob" * 8
            if self.cluster:
                # the blob lives in the cluster's S3 store: overwrite the object
                # behind the store's back (every read re-hashes it)
                prefix = self.cluster.env()["KESTREL_ARTIFACTS"][len("s3://"):].split("/", 1)
                key = "%sobjects/%s/%s" % (prefix[1].strip("/") + "/" if len(prefix) > 1 and prefix[1] else "",
                                           digest[:2], digest)
                try:
                    self.cluster.put_object(key, garbage)
                except Exception as e:
                    return "failed: overwriting s3 object %s: %r" % (key, e)
                rec["corrupted"] = [img, "s3:" + key[:-52]]
            else:
                blob = None
                for cand in (os.path.join(self.home, "objects", digest[:2], digest),):
                    if os.path.exists(cand):
                        blob = cand
                if blob is None:
                    return "failed: blob %s of %s not found under objects/" % (digest[:12], img)
                os.chmod(blob, 0o644)
                with open(blob, "r+b") as f:
                    f.write(garbage)
                rec["corrupted"] = [img, "objects/%s/%s" % (digest[:2], digest[:12])]
            # the loader counts and skips undecodable samples up to max_bad_fraction
            spec = self.job_spec(data=name, max_bad_fraction="0.3")
        doc, rc, msg, tries = self.submit(spec)
        if doc is None:
            return "failed: submit on %s rc=%d %s" % (name, rc, msg[-200:])
        jid = self.add_valid(doc, spec, "corrupt_dataset_" + variant, tries=tries)
        rec["job"] = jid
        rec["t_submit_ms"] = now_ms()
        return "ok"

    def f_nan_config(self, rec):
        spec = self.job_spec(lr0="1e6", warmup_epochs="0")
        rec["t_inject_ms"] = now_ms()
        doc, rc, msg, tries = self.submit(spec, deadline_s=60)
        cls = None
        if rc == 2:
            low = msg.lower()
            cls = "bad_config" if ("lr0" in low) else "usage(rc=2)"
        entry = dict(kind="nan_config", spec={"lr0": "1e6"}, rc=rc, expected="bad_config",
                     got=cls or ("accepted" if doc else "rc=%d" % rc), message=msg[-300:])
        if doc is not None:
            entry["job_id"] = doc["job_id"]   # accepted: it must end failed_permanent (diverged)
        with self.rec.lock:
            self.rec.invalid.append(entry)
        return "ok" if cls == "bad_config" else "unexpected: %s" % entry["got"]

    def f_disk_full(self, rec):
        if self.cluster:
            return self.host_fault(rec, "disk_full")
        if self.mounted is None:
            return "unsupported: %s" % (self.quota_skip or "no quota mount")
        cands = self.wait_for_victims()
        rec["victims"] = self.victims(cands)
        filler = os.path.join(self.mounted, ".soak-filler")
        hold = self.rng.uniform(self.o.disk_hold_min_s, self.o.disk_hold_max_s)
        rec["t_inject_ms"] = now_ms()
        written = 0
        chunk = b"\0" * (1 << 20)
        try:
            with open(filler, "wb") as f:
                while True:
                    try:
                        f.write(chunk)
                        f.flush()
                        written += len(chunk)
                    except OSError:
                        break
        except OSError:
            pass
        rec["filled_mb"] = written >> 20
        rec["variant"] = "tmpfs %d MiB filled for %.1f s" % (self.o.quota_mb, hold)
        time.sleep(hold)
        try:
            os.unlink(filler)
        except OSError:
            pass
        rec["t_back_ms"] = now_ms()
        with self.rec.lock:
            for c in cands:
                self.rec.hits[c[0]] += 1
        return "ok"

    def host_fault(self, rec, kind):
        """A fault on the host running a victim attempt; every attempt there is a
        victim. cut_link / freeze_host hold the host away for a while, then it
        comes back (its worker must learn it lost its leases, and fencing must
        refuse what it still writes); poweroff_host kills all of it and boots
        its worker again later; disk_full fills the host's disk, then frees it."""
        o = self.o
        cands = self.wait_for_victims()
        v = self.pick_victim(cands)
        if v is None:
            return "skipped: no running attempt"
        host = v[5]
        i = self.workers.index(host)
        hit = [c for c in cands if c[5] == host]
        rec["host"] = host
        rec["victims"] = self.victims(hit)
        hold = self.rng.uniform(o.host_hold_min_s, o.host_hold_max_s)
        res = "ok"
        if kind in ("cut_link", "freeze_host"):
            down, up = ("cut", "restore") if kind == "cut_link" else ("freeze", "thaw")
            rec["t_inject_ms"] = now_ms()
            try:
                rc, out = self.cluster.fault(down, host)
                if rc != 0:
                    res = "failed: cluster.sh %s rc=%d: %s" % (down, rc, out[-300:])
                else:
                    self.stop_evt.wait(hold)
            finally:
                rc, out = self.cluster.fault(up, host)   # always bring it back
                rec["t_back_ms"] = now_ms()
            if rc != 0 and res == "ok":
                res = "failed: cluster.sh %s rc=%d: %s" % (up, rc, out[-300:])
            rec["variant"] = "%s %s for %.1f s, then %s" % (down, host, hold, up)
            # back on the network: the host's old trainers must stop (fenced), not run on
            threading.Thread(target=self.watch_orphans, args=(hit,), daemon=True).start()
        elif kind == "poweroff_host":
            reboot = self.rng.uniform(o.reboot_min_s, o.reboot_max_s)
            self.workers.expect_down(i, reboot)
            rec["t_inject_ms"] = now_ms()
            rc, out = self.cluster.fault("poweroff", host)
            rec["t_back_ms"] = rec["t_inject_ms"] + int(reboot * 1000)
            rec["variant"] = "poweroff %s, worker started again after %.1f s" % (host, reboot)
            if rc != 0:
                res = "failed: cluster.sh poweroff rc=%d: %s" % (rc, out[-300:])
        elif kind == "disk_full":
            hold = self.rng.uniform(o.disk_hold_min_s, o.disk_hold_max_s)
            filler = os.path.join(self.cluster.state, host, "fill")   # what cluster.sh fill-disk writes
            rec["t_inject_ms"] = now_ms()
            try:
                rc, out = self.cluster.fault("fill-disk", host)
                rec["filled_mb"] = (os.path.getsize(filler) >> 20) if os.path.exists(filler) else 0
                if rc != 0:
                    res = "failed: cluster.sh fill-disk rc=%d: %s" % (rc, out[-300:])
                else:
                    self.stop_evt.wait(hold)
            finally:
                try:
                    os.unlink(filler)
                except OSError:
                    pass
                rec["t_back_ms"] = now_ms()
            rec["variant"] = "%s's disk (%d MiB tmpfs) filled for %.1f s" % (host, o.host_disk_mb, hold)
        with self.rec.lock:
            for c in hit:
                self.rec.hits[c[0]] += 1
        return res

    def f_cut_link(self, rec):
        return self.host_fault(rec, "cut_link")

    def f_freeze_host(self, rec):
        return self.host_fault(rec, "freeze_host")

    def f_poweroff_host(self, rec):
        return self.host_fault(rec, "poweroff_host")

    def f_restart_s3(self, rec):
        cands = self.wait_for_victims()
        rec["victims"] = self.victims(cands)
        rec["t_inject_ms"] = now_ms()
        rc, out = self.cluster.fault("restart-s3")
        rec["t_back_ms"] = now_ms()
        rec["variant"] = "S3 proxy killed and started (%.1f s)" % ((rec["t_back_ms"] - rec["t_inject_ms"]) / 1000)
        if rc != 0:
            return "failed: cluster.sh restart-s3 rc=%d: %s" % (rc, out[-300:])
        with self.rec.lock:
            for c in cands:
                self.rec.hits[c[0]] += 1
        return "ok"

    def f_dup_submit(self, rec):
        spec = self.job_spec()
        results = [None] * 10
        barrier = threading.Barrier(10)

        def one(i):
            barrier.wait()
            results[i] = self.submit(spec)

        rec["t_inject_ms"] = now_ms()
        ts = [threading.Thread(target=one, args=(i,)) for i in range(10)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        ids = sorted({r[0]["job_id"] for r in results if r[0]})
        created = sum(1 for r in results if r[0] and r[0].get("created"))
        failed = sum(1 for r in results if not r[0])
        group = dict(job_ids=ids, created=created, failed=failed, seed=spec["seed"])
        with self.rec.lock:
            self.rec.groups.append(group)
        rec["group"] = group
        for r in results:
            if r[0]:
                self.add_valid(r[0], spec, "dup_submit")
        # one job and one `created`; more ids are fine only when a twin was submitted after
        # the first one had already finished (checked with the store's times at the end)
        return "ok" if (len(ids) == created and failed == 0) else "unexpected: %s" % group

    def injector(self):
        o = self.o
        order = []
        counts = collections.Counter()   # injected
        attempted = collections.Counter()  # tried, skipped ones included
        extra_jobs = 0
        topping_since = None
        while not self.stop_evt.is_set():
            wait = self.rng.uniform(o.fault_every_min_s, o.fault_every_max_s)
            if self.submit_done.is_set():
                # topping up: poll quickly, or a victim's short job ends between tries
                wait = min(wait, 0.5)
            if self.stop_evt.wait(wait):
                return
            if self.submit_done.is_set():
                # all jobs are in: top up the types injected fewer than --min-each
                # times; those that need a running attempt only while jobs are live.
                # Never longer than the drain timeout: a fault that can find no
                # victim then shows up as missing in the report, not as a hang.
                if topping_since is None:
                    topping_since = time.time()
                if time.time() - topping_since > o.drain_timeout_s:
                    short = [f for f in o.faults if counts[f] < o.min_each]
                    self.rec.event("injector_gave_up", missing=short)
                    log("injector: no victim for %s within %d s; giving up" % (short, o.drain_timeout_s))
                    return
                live = self.live_count()
                starved = [f for f in o.faults if counts[f] < o.min_each and f in VICTIM_FAULTS and live == 0]
                if starved and extra_jobs < 2 * len(o.faults):
                    # every job finished before this fault found a victim: give it
                    # one (an extra valid job, counted like any other), long
                    # enough (~10 s) that a loaded machine's slow CLI polls
                    # still see it running (2- and 8-epoch jobs of 3-5 s slipped
                    # past every poll of a PostgreSQL run beside another soak)
                    spec = self.job_spec(epochs=max(20 * o.epochs, 40))
                    doc, rc, msg, tries = self.submit(spec)
                    if doc is not None:
                        self.add_valid(doc, spec, "victim_for_" + starved[0], tries=tries)
                        log("extra job %d so that %s has a victim" % (doc["job_id"], starved[0]))
                    extra_jobs += 1
                    continue
                missing = [f for f in o.faults if counts[f] < o.min_each
                           and (f not in VICTIM_FAULTS or live > 0)]
                if not missing:
                    return
                # the least tried first: one type that keeps finding no victim
                # must not starve the others
                kind = min(missing, key=lambda f: (attempted[f], o.faults.index(f)))
            else:
                if not order:
                    # each round: the faults that need a running attempt first (the
                    # queue is full then), the input faults after (they need none)
                    a = [f for f in o.faults if f in VICTIM_FAULTS]
                    b = [f for f in o.faults if f not in VICTIM_FAULTS]
                    self.rng.shuffle(a)
                    self.rng.shuffle(b)
                    order = b[::-1] + a[::-1]
                kind = order.pop()
            attempted[kind] += 1
            rec = self.rec.fault(dict(type=kind, t_start_ms=now_ms()))
            try:
                res = getattr(self, "f_" + kind)(rec)
            except Exception as e:   # a fault that breaks must not end the soak
                res = "error: %r" % (e,)
            rec["result"] = res
            if res.startswith("skipped"):
                # nothing to hit right now: try this type again later
                if not self.submit_done.is_set():
                    order.insert(0, kind)
            else:
                counts[kind] += 1
            log("fault %-15s %s%s" % (kind, res, "" if not rec.get("victims") else
                                      " jobs %s" % [v["job"] for v in rec["victims"]]))

    # ---- drain, collect, check

    def drain(self):
        o = self.o
        end = time.time() + o.drain_timeout_s
        while time.time() < end:
            with self.rec.lock:
                ids = list(self.rec.valid) + [e["job_id"] for e in self.rec.invalid if "job_id" in e]
            with self.snap_lock:
                snap = dict(self.snapshot)
                fresh = self.snapshot_ms
            if fresh > now_ms() - 10000 and all(j in snap and snap[j]["state"] in FINAL for j in ids):
                return True
            time.sleep(2)
        return False

    def collect(self):
        jobs = {j["id"]: j for j in self.k.json(["jobs", "list", "--limit", "100000000"], deadline_s=120).get("jobs", [])}
        shows = {}
        lock = threading.Lock()
        ids = sorted(jobs)

        def worker(chunk):
            for j in chunk:
                try:
                    d = self.k.json(["jobs", "show", str(j)], deadline_s=60)
                except RuntimeError as e:
                    d = {"error": str(e)}
                with lock:
                    shows[j] = d

        n = max(1, self.o.collect_threads)
        ts = [threading.Thread(target=worker, args=(ids[i::n],)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        stats = None
        try:
            stats = self.k.json(["stats"], deadline_s=60)
        except RuntimeError as e:
            stats = {"error": str(e)}
        return jobs, shows, stats

    def attempt_log(self, job, attempt):
        """The text of a job's attempt log, on whichever host ran it ("" if none)."""
        for h in self.homes:
            path = os.path.join(h, "jobs", str(job), "attempt-%s.log" % attempt)
            try:
                with open(path, errors="replace") as fh:
                    return fh.read()
            except OSError:
                continue
        return ""

    @staticmethod
    def attempt_succeeded(a):
        if "succeeded" in a:
            return bool(a["succeeded"])
        return ((a.get("ended_ms") or 0) > 0 and a.get("exit_code") == 0 and not a.get("signal")
                and not a.get("failure_class") and a.get("reason") in (None, "", "succeeded", "ok"))

    def analyze(self, jobs, shows, stats, drained):
        o = self.o
        R = self.rec
        valid_ids = sorted(R.valid)
        invalid_accepted = [e["job_id"] for e in R.invalid if "job_id" in e]
        states = collections.Counter()
        lost, stuck, failed = [], [], []
        for j in valid_ids:
            if j not in jobs:
                lost.append(j)
                continue
            s = jobs[j]["state"]
            states[s] += 1
            if s in LIVE:
                stuck.append(j)
            elif s != "succeeded":
                failed.append(dict(job=j, state=s, reason=jobs[j].get("last_reason")))
        for j in invalid_accepted:
            if j not in jobs:
                lost.append(j)
            elif jobs[j]["state"] in LIVE:
                stuck.append(j)
        succeeded = states["succeeded"]
        n_valid = len(valid_ids) + len(R.submit_gave_up)
        availability = succeeded / n_valid if n_valid else 0.0

        # duplicates: two committed successes for one job, two jobs for one key,
        # a ten-at-once group that made more than one job, jobs nobody submitted
        dups = []
        for j, d in shows.items():
            atts = d.get("attempts") or []
            ok = [a.get("attempt") for a in atts if self.attempt_succeeded(a)]
            if len(ok) > 1:
                dups.append(dict(kind="two_successful_attempts", job=j, attempts=ok))
            if jobs.get(j, {}).get("state") == "succeeded" and not ok:
                dups.append(dict(kind="succeeded_without_successful_attempt", job=j))
            if jobs.get(j, {}).get("state") == "succeeded" and not jobs[j].get("result"):
                dups.append(dict(kind="succeeded_without_result", job=j))
        for e in R.events:
            if e["kind"] == "result_missing_at_finish":
                dups.append(dict(kind="succeeded_but_best_weights_missing", job=e["job"], best=e.get("best")))
        by_key = collections.defaultdict(list)
        for j, d in shows.items():
            key = (d.get("job") or {}).get("dedup_key") or (R.valid.get(j) or {}).get("dedup_key")
            if key and jobs.get(j, {}).get("state") == "succeeded":
                by_key[key].append(j)
        def overlapping(js):
            """Jobs of one key whose lifetimes overlap: dedup covers live jobs only, so a
            resubmission after the first one finished is a new job by design."""
            spans = sorted((jobs[j]["created_ms"], jobs[j].get("finished_ms") or 0, j) for j in js if j in jobs)
            out = []
            for (c0, f0, j0), (c1, f1, j1) in zip(spans, spans[1:]):
                if f0 == 0 or c1 < f0:
                    out.append((j0, j1))
            return out

        for key, js in by_key.items():
            if len(js) > 1 and overlapping(js):
                dups.append(dict(kind="two_succeeded_jobs_one_key", key=key[:16], jobs=js))
        for g in R.groups:
            if len(g["job_ids"]) != g["created"] or overlapping(g["job_ids"]):
                dups.append(dict(kind="dup_submit_group", **g))
        known = set(valid_ids) | set(invalid_accepted)
        for j in jobs:
            if j not in known:
                dups.append(dict(kind="job_nobody_submitted", job=j, state=jobs[j]["state"]))

        # attempts: counts, failure reasons
        attempts = 0
        reasons = collections.Counter()
        for d in shows.values():
            for a in d.get("attempts") or []:
                attempts += 1
                if not self.attempt_succeeded(a) and (a.get("ended_ms") or 0) > 0:
                    reasons[a.get("reason") or "?"] += 1

        # recovery per fault type
        rec_by = collections.defaultdict(list)
        succ_by = collections.defaultdict(list)
        resumes = collections.defaultdict(collections.Counter)
        ended = collections.defaultdict(collections.Counter)
        fault_counts = collections.Counter()
        skipped = collections.Counter()
        for f in R.faults:
            res = f.get("result", "")
            if res.startswith("unexpected"):
                fault_counts[f["type"]] += 1   # injected; the wrong answer is counted by its check
            if res != "ok":
                skipped[(f["type"], res[:100])] += 1
                continue
            fault_counts[f["type"]] += 1
            t0 = f.get("t_inject_ms")
            for v in f.get("victims") or []:
                d = shows.get(v["job"]) or {}
                nxt = [a for a in d.get("attempts") or []
                       if (a.get("attempt") or 0) > (v.get("attempt") if v.get("attempt", -1) >= 0 else 0)
                       and (a.get("started_ms") or 0) >= t0]
                if f["type"] == "disk_full":
                    # the running attempts may or may not have written during the window;
                    # recovered = the job made progress after the space came back
                    pass
                if nxt:
                    first = min(nxt, key=lambda a: a["started_ms"])
                    rec_by[f["type"]].append(first["started_ms"] - t0)
                    # how the next attempt started: from a checkpoint, and from one
                    # another host recorded (fetched from the S3 store)?
                    text = self.attempt_log(v["job"], first.get("attempt"))
                    r = resumes[f["type"]]
                    r["next_attempts"] += 1
                    r["resumed"] += int("resumed from" in text)
                    r["fetched_from_s3"] += int("'s checkpoint from" in text)
                    if self.cluster and v.get("host"):
                        # namespaces share the machine's hostname: the worker id names the host
                        r["other_host"] += int(first.get("worker") != "soak-" + v["host"])
                old = [a for a in d.get("attempts") or [] if a.get("attempt") == v.get("attempt")]
                if old:
                    a0 = old[0]
                    ended[f["type"]]["succeeded" if self.attempt_succeeded(a0) else
                                     a0.get("reason") or ("running" if not a0.get("ended_ms") else "?")] += 1
                j = jobs.get(v["job"]) or {}
                if j.get("state") == "succeeded" and j.get("finished_ms"):
                    succ_by[f["type"]].append(j["finished_ms"] - t0)
            if f["type"] in ("restart_store", "restart_s3") and f.get("t_back_ms"):
                # time until the system ran work again: first attempt started after the store came back
                starts = [a.get("started_ms") for d in shows.values() for a in d.get("attempts") or []
                          if (a.get("started_ms") or 0) >= f["t_back_ms"]]
                if starts:
                    rec_by[f["type"] + "(first_claim)"].append(min(starts) - t0)
            if f["type"] in ("corrupt_dataset",) and f.get("job") in jobs:
                j = jobs[f["job"]]
                if j.get("state") == "succeeded" and j.get("finished_ms"):
                    succ_by[f["type"] + "(submit->success)"].append(j["finished_ms"] - f["t_submit_ms"])

        # the hosts' share of the attempts, and what fencing refused (the worker logs)
        by_worker = collections.Counter()
        for d in shows.values():
            for a in d.get("attempts") or []:
                by_worker[a.get("worker") or "?"] += 1
        fenced = collections.Counter()
        for name in sorted(os.listdir(self.logs)) if os.path.isdir(self.logs) else []:
            if name.startswith("worker-"):
                with open(os.path.join(self.logs, name), errors="replace") as fh:
                    for line in fh:
                        if "lost its lease" in line:
                            fenced["lease_renewal_refused"] += 1
                        if "result discarded" in line:
                            fenced["result_discarded"] += 1
        hit_jobs = set()
        for f in R.faults:
            if f.get("result") == "ok":
                hit_jobs.update(v["job"] for v in f.get("victims") or [])
                if f.get("job"):
                    hit_jobs.add(f["job"])
        for g in R.groups:
            hit_jobs.update(g["job_ids"])
        hit_valid = len(hit_jobs & set(valid_ids))
        hit_fraction = hit_valid / n_valid if n_valid else 0.0

        def summ(xs):
            if not xs:
                return None
            xs = sorted(xs)
            return dict(n=len(xs), mean_s=round(sum(xs) / len(xs) / 1000, 2), max_s=round(xs[-1] / 1000, 2),
                        p50_s=round(xs[len(xs) // 2] / 1000, 2))

        recovery = {k: summ(v) for k, v in sorted(rec_by.items())}
        to_success = {k: summ(v) for k, v in sorted(succ_by.items())}

        rejected_ok = [e for e in R.invalid if e["got"] == e["expected"]]
        rejected_bad = [e for e in R.invalid if e["got"] != e["expected"]]
        # an accepted invalid job must at least end failed_permanent
        for e in R.invalid:
            if "job_id" in e:
                e["final_state"] = (jobs.get(e["job_id"]) or {}).get("state")

        ev = collections.Counter(e["kind"] for e in R.events)
        missing_faults = [f for f in o.faults if fault_counts[f] == 0]
        checks = collections.OrderedDict()
        checks["availability >= %g" % o.min_availability] = availability >= o.min_availability
        checks["lost == 0"] = not lost
        checks["stuck == 0"] = not stuck and drained
        checks["duplicates == 0"] = not dups
        checks["invalid inputs rejected with the expected class"] = not rejected_bad
        if o.min_hit_fraction > 0:
            checks["jobs hit by a fault >= %g" % o.min_hit_fraction] = hit_fraction >= o.min_hit_fraction
        if o.require_all_faults:
            ok_missing = [f for f in missing_faults
                          if not any(k[0] == f and k[1].startswith("unsupported") for k in skipped)]
            checks["every fault type injected (or unsupported here, with the reason)"] = not ok_missing
        report = collections.OrderedDict(
            kestrel=self.version, store=("postgres+s3 (cluster of %d hosts)" % o.cluster) if o.cluster else o.store,
            cluster_hosts=o.cluster, seed=o.seed, workers=o.workers, slots=o.slots,
            model=o.model, epochs=o.epochs, wall_s=round(time.time() - self.t0, 1),
            jobs_submitted=len(valid_ids) + len(R.invalid), valid_jobs=n_valid, invalid_inputs=len(R.invalid),
            valid_states=dict(states), succeeded=succeeded, availability=round(availability, 6),
            lost=lost, stuck=stuck, failed_valid=failed, duplicates=dups,
            submit_retries=R.submit_retries, submit_gave_up=R.submit_gave_up,
            attempts=attempts, failed_attempt_reasons=dict(reasons),
            faults_injected=dict(fault_counts),
            faults_not_injected={"%s: %s" % k: v for k, v in skipped.items()},
            recovery_to_next_attempt=recovery, fault_to_job_success=to_success,
            next_attempt_resume={k: dict(v) for k, v in sorted(resumes.items())},
            victim_attempt_ended={k: dict(v) for k, v in sorted(ended.items())},
            jobs_hit_by_fault=hit_valid, fault_hit_fraction=round(hit_fraction, 4),
            attempts_by_worker=dict(sorted(by_worker.items())), fenced_late_writes=dict(fenced),
            invalid_rejected=[dict(kind=e["kind"], expected=e["expected"], got=e["got"],
                                   **({"final_state": e["final_state"]} if "final_state" in e else {}),
                                   **({"message": e["message"][:160]} if e.get("message") else {}))
                              for e in R.invalid],
            invalid_rejected_ok=len(rejected_ok),
            dup_submit_groups=R.groups,
            breaker=dict(opened=R.breaker_opened, resets=R.breaker_resets, reasons=dict(R.breaker_reasons)),
            events=dict(ev), findings=[e for e in R.events if e["kind"] in (
                "hang_not_detected", "orphan_trainer_alive", "worker_exit_unexpected", "leftover_process")],
            worker_starts=dict(self.workers.starts) if self.workers else {},
            kestrel_stats=stats, cli_calls=self.k.count,
            checks=checks, passed=all(checks.values()))
        return report

    def print_report(self, r):
        p = print
        p("")
        p("== Kestrel soak report (%s, store %s, seed %d, %d workers x %d slots, %.0f s)"
          % (r["kestrel"], r["store"], r["seed"], r["workers"], r["slots"], r["wall_s"]))
        p("jobs submitted        %d  (valid %d, invalid inputs %d)"
          % (r["jobs_submitted"], r["valid_jobs"], r["invalid_inputs"]))
        p("valid job states      %s" % json.dumps(r["valid_states"], sort_keys=True))
        p("availability (valid)  %.4f  (%d/%d succeeded)" % (r["availability"], r["succeeded"], r["valid_jobs"]))
        p("lost                  %d %s" % (len(r["lost"]), r["lost"][:20] or ""))
        p("stuck                 %d %s" % (len(r["stuck"]), r["stuck"][:20] or ""))
        p("duplicates            %d %s" % (len(r["duplicates"]), json.dumps(r["duplicates"][:5]) if r["duplicates"] else ""))
        if r["failed_valid"]:
            p("failed valid jobs     %s" % json.dumps(r["failed_valid"][:10]))
        p("attempts              %d; failed attempts by reason %s"
          % (r["attempts"], json.dumps(r["failed_attempt_reasons"], sort_keys=True)))
        p("submit retries        %d (gave up %d)" % (r["submit_retries"], len(r["submit_gave_up"])))
        p("breaker               opened %d, reset %d %s" % (r["breaker"]["opened"], r["breaker"]["resets"],
                                                            json.dumps(r["breaker"]["reasons"])))
        p("faults injected       %s" % json.dumps(r["faults_injected"], sort_keys=True))
        if r["faults_not_injected"]:
            p("faults not injected   %s" % json.dumps(r["faults_not_injected"], sort_keys=True))
        p("recovery per fault (injection -> next attempt started):")
        keys = sorted(set(r["recovery_to_next_attempt"]) | set(r["fault_to_job_success"]))
        for k in keys:
            a = r["recovery_to_next_attempt"].get(k)
            b = r["fault_to_job_success"].get(k)
            p("  %-28s %s | to job success %s" % (
                k, "n=%d mean %.1f s max %.1f s" % (a["n"], a["mean_s"], a["max_s"]) if a else "-",
                "n=%d mean %.1f s max %.1f s" % (b["n"], b["mean_s"], b["max_s"]) if b else "-"))
        if r["next_attempt_resume"]:
            p("victims' next attempt (resumed from a checkpoint / fetched from S3 / on another host):")
            for k, v in r["next_attempt_resume"].items():
                p("  %-28s %d/%d resumed, %d from S3, %d on another host; victim attempt ended %s" % (
                    k, v.get("resumed", 0), v.get("next_attempts", 0), v.get("fetched_from_s3", 0),
                    v.get("other_host", 0), json.dumps(r["victim_attempt_ended"].get(k, {}), sort_keys=True)))
        p("jobs hit by a fault   %d of %d valid (%.1f %%)" % (r["jobs_hit_by_fault"], r["valid_jobs"],
                                                            100 * r["fault_hit_fraction"]))
        if r["cluster_hosts"]:
            p("attempts by worker    %s" % json.dumps(r["attempts_by_worker"], sort_keys=True))
            p("fenced late writes    %s" % json.dumps(r["fenced_late_writes"], sort_keys=True))
        p("invalid inputs        %d, rejected with the expected class %d:" % (r["invalid_inputs"], r["invalid_rejected_ok"]))
        cnt = collections.Counter((e["kind"], e["expected"], e["got"]) for e in r["invalid_rejected"])
        for (kind, exp, got), n in sorted(cnt.items()):
            p("  %-24s x%-3d expected %-15s got %s" % (kind, n, exp, got))
        if r["findings"]:
            p("findings              %d:" % len(r["findings"]))
            for e in r["findings"][:20]:
                p("  %s" % json.dumps(e, sort_keys=True))
        ks = r.get("kestrel_stats") or {}
        if "availability" in ks:
            p("kestrel stats         availability %s, mean_time_to_recovery_ms %s"
              % (ks.get("availability"), ks.get("mean_time_to_recovery_ms")))
        p("checks:")
        for k, v in r["checks"].items():
            p("  [%s] %s" % ("PASS" if v else "FAIL", k))
        p("RESULT: %s" % ("PASS" if r["passed"] else "FAIL"))
        sys.stdout.flush()

    def cleanup_processes(self):
        if self.workers:
            self.workers.stop_all(grace=self.o.grace_s + 10)
        for pid, (job, att, state, ppid, host) in our_trainers(self.homes).items():
            self.rec.event("leftover_process", job=job, attempt=att, pid=pid, state=state)
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def run(self):
        o = self.o
        self.setup()
        self.t0 = time.time()
        self.last_progress = self.t0
        self.workers.start()
        threads = [threading.Thread(target=self.monitor, name="monitor", daemon=True),
                   threading.Thread(target=self.submitter, name="submitter", daemon=True)]
        inj = threading.Thread(target=self.injector, name="injector", daemon=True)
        for t in threads:
            t.start()
        if o.faults:
            inj.start()
        self.submit_done.wait()
        if o.faults:
            inj.join()
        log("all jobs submitted; draining (timeout %d s)" % o.drain_timeout_s)
        drained = self.drain()
        if not drained:
            log("drain timed out: some jobs are stuck")
        self.stop_evt.set()
        threads[0].join(timeout=60)
        jobs, shows, stats = self.collect()
        self.cleanup_processes()
        report = self.analyze(jobs, shows, stats, drained)
        self.print_report(report)
        if o.json:
            with open(o.json, "w") as f:
                json.dump(report, f, indent=2, sort_keys=False)
        return report

    def teardown(self, passed):
        if self.workers:
            try:
                self.cleanup_processes()
            except Exception:
                pass
        keep = self.o.keep or not passed or self.o.workdir
        if self.cluster is not None:
            if keep and self.cluster.is_up:
                self.cluster.keep_logs(self.logs)   # the hosts' disks go with the cluster
            self.cluster.down()
        elif self.store is not None:
            self.store.stop()
        if self.mounted:
            subprocess.run(["umount", "-l", self.mounted], capture_output=True)
        if not keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log("kept work dir %s (logs in logs/)" % self.work)


def parse_args(argv):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description="Kestrel soak test: real jobs, real workers, injected faults.",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--kestrel", default=os.path.join(root, "build", "src", "cli", "kestrel"),
                    help="the kestrel binary")
    ap.add_argument("--jobs", type=int, default=24, help="valid jobs to submit (fault jobs come on top)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--slots", type=int, default=1, help="slots per worker")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--cluster", type=int, default=0, metavar="N",
                    help="run the workers on N hosts of tools/cluster/cluster.sh (network namespaces, "
                         "as root) with its PostgreSQL and S3 store, one worker per host (--workers is "
                         "then N); adds the host faults %s" % ",".join(CLUSTER_FAULTS))
    ap.add_argument("--faults", default="all",
                    help="comma list of %s (with --cluster also %s), 'all' or 'none'"
                    % (",".join(FAULTS), ",".join(CLUSTER_FAULTS)))
    ap.add_argument("--duration-s", type=float, default=3600 * 24,
                    help="stop submitting after this many seconds (then drain)")
    ap.add_argument("--stall-timeout-s", type=float, default=300,
                    help="no job changing state for this long stops submitting (then drain)")
    ap.add_argument("--drain-timeout-s", type=float, default=600,
                    help="jobs still live this long after the last submission are stuck")
    ap.add_argument("--json", help="write the report as JSON here")
    ap.add_argument("--workdir", help="work dir (default a temp dir, removed when the run passes)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    # the job
    ap.add_argument("--model", default="t", help="model scale (t = Kestrel's tiny test model)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--images", type=int, default=16, help="images in the synthetic dataset")
    ap.add_argument("--max-retries", type=int, default=5)
    ap.add_argument("--backoff", default="0.5,1,2")
    ap.add_argument("--time-limit-s", type=int, default=300)
    ap.add_argument("--max-live", type=int, default=0, help="live valid jobs at most (0 = 2 x slots total + 2)")
    ap.add_argument("--submit-deadline-s", type=float, default=180, help="retry a failing submit this long")
    # supervision timings
    ap.add_argument("--heartbeat-s", type=float, default=1)
    ap.add_argument("--hang-timeout-s", type=float, default=10)
    ap.add_argument("--lease-s", type=float, default=5)
    ap.add_argument("--grace-s", type=float, default=2)
    ap.add_argument("--poll-s", type=float, default=0.5)
    ap.add_argument("--worker-arg", action="append", default=[], help="extra argument for kestrel worker")
    # the injector
    ap.add_argument("--fault-every-min-s", type=float, default=4)
    ap.add_argument("--fault-every-max-s", type=float, default=12)
    ap.add_argument("--min-each", type=int, default=1, help="inject each fault type at least this often")
    ap.add_argument("--max-hits-per-job", type=int, default=2,
                    help="faults aimed at one job at most (keeps faults from exhausting a retry budget)")
    ap.add_argument("--worker-restart-s", type=float, default=1.0, help="delay before a killed worker restarts")
    ap.add_argument("--store-down-max-s", type=float, default=4)
    ap.add_argument("--quota-dir", default="jobs", help="folder under the home that gets the tmpfs quota")
    ap.add_argument("--quota-mb", type=int, default=1024)
    ap.add_argument("--prune", choices=["none", "ckpt", "run"], default="ckpt",
                    help="disk housekeeping for finished jobs: drop *.ckpt, or (after checking the "
                         "result's best weights exist) all but the attempt logs")
    ap.add_argument("--disk-hold-min-s", type=float, default=2)
    ap.add_argument("--disk-hold-max-s", type=float, default=6)
    ap.add_argument("--host-hold-min-s", type=float, default=6,
                    help="--cluster: a cut link / frozen host stays away at least this long "
                         "(longer than --lease-s, so its leases expire)")
    ap.add_argument("--host-hold-max-s", type=float, default=10)
    ap.add_argument("--reboot-min-s", type=float, default=2,
                    help="--cluster: a powered-off host's worker starts again after this long")
    ap.add_argument("--reboot-max-s", type=float, default=6)
    ap.add_argument("--host-disk-mb", type=int, default=512, help="--cluster: each host's disk (tmpfs)")
    ap.add_argument("--min-free-gb", type=float, default=0.1,
                    help="--cluster: the workers' low-disk watermark (below the host's disk)")
    ap.add_argument("--s3-cache-gb", type=float, default=0.1,
                    help="--cluster: KESTREL_S3_CACHE_GB of the workers (their disks are small)")
    ap.add_argument("--min-hit-fraction", type=float, default=0,
                    help="fail unless at least this fraction of the valid jobs was hit by a fault")
    ap.add_argument("--require-all-faults", action="store_true",
                    help="fail when a fault type was never injected (unless skipped for a stated reason)")
    # operator
    ap.add_argument("--breaker", choices=["reset", "wait"], default="reset",
                    help="when the circuit breaker opens: reset it after a pause (an operator) or wait")
    ap.add_argument("--breaker-reset-after-s", type=float, default=3)
    ap.add_argument("--monitor-every-s", type=float, default=2)
    ap.add_argument("--stats-every-s", type=float, default=6)
    ap.add_argument("--collect-threads", type=int, default=2)
    ap.add_argument("--min-availability", type=float, default=0.999)
    o = ap.parse_args(argv)
    known = FAULTS + CLUSTER_FAULTS if o.cluster else FAULTS
    if o.cluster < 0 or o.cluster > 8:
        ap.error("--cluster N takes 1..8 worker hosts (0 = no cluster)")
    if o.faults == "all":
        o.faults = list(known)
    elif o.faults in ("none", ""):
        o.faults = []
    else:
        o.faults = [f.strip() for f in o.faults.split(",") if f.strip()]
        bad = [f for f in o.faults if f not in known]
        if bad:
            ap.error("unknown fault %s (known: %s%s)" % (bad, ", ".join(known), "" if o.cluster else
                                                         "; %s need --cluster" % ", ".join(CLUSTER_FAULTS)))
    if o.cluster:
        o.workers = o.cluster
        o.store = "postgres"
    if o.max_live <= 0:
        o.max_live = 2 * o.workers * o.slots + 2
    o.kestrel = os.path.abspath(o.kestrel)
    if not os.access(o.kestrel, os.X_OK):
        ap.error("no kestrel binary at %s (--kestrel)" % o.kestrel)
    return o


def _on_term(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    o = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _on_term)
    soak = Soak(o)
    signal.signal(signal.SIGUSR1, lambda signum, frame: soak.finish_evt.set())
    passed = False
    try:
        report = soak.run()
        passed = report["passed"]
    except SetupError as e:
        log("setup error: %s" % e)
        soak.teardown(False)
        return 2
    except Unsupported as e:
        print("SKIP: %s" % e)
        sys.stdout.flush()
        log("skipped: %s" % e)
        soak.o.keep = False
        soak.teardown(True)
        return 77
    except KeyboardInterrupt:
        log("interrupted")
        soak.stop_evt.set()
        soak.teardown(False)
        return 130
    soak.teardown(passed)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
