"""A PEP 517 build backend of the standard library alone.

`pip install ./python` builds the wheel with this file (pyproject.toml names
it with backend-path), so installing needs nothing fetched: no setuptools,
no wheel package. It packs kestrel/*.py with the dist-info files a wheel
must carry (METADATA, WHEEL, RECORD); build_editable writes a wheel whose
.pth file puts this folder on sys.path; build_sdist a .tar.gz of the sources.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NAME = "kestrel"
_SUMMARY = "Drive Kestrel (the object-detection training platform) from Python: CLI and REST API"


def _version():
    with open(os.path.join(_ROOT, _NAME, "__init__.py"), encoding="utf-8") as f:
        match = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not match:
        raise RuntimeError("kestrel/__init__.py has no __version__ line")
    return match.group(1)


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {_NAME}\nVersion: {_version()}\n"
            f"Summary: {_SUMMARY}\nRequires-Python: >=3.8\n").encode()


def _wheel_file():
    return b"Wheel-Version: 1.0\nGenerator: kestrel_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _sources():
    pkg = os.path.join(_ROOT, _NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                yield f"{_NAME}/{name}", f.read()


def _write_wheel(wheel_directory, files):
    dist_info = f"{_NAME}-{_version()}.dist-info"
    files = list(files) + [(f"{dist_info}/METADATA", _metadata()),
                           (f"{dist_info}/WHEEL", _wheel_file())]
    record = [_record_line(p, d) for p, d in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{_NAME}-{_version()}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _sources())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(f"{_NAME}.pth", (_ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{_NAME}-{_version()}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        members = [("pyproject.toml", None), ("_backend/kestrel_build.py", None)]
        members += [(p, None) for p, _ in _sources()]
        for rel, _ in members:
            tar.add(os.path.join(_ROOT, rel), arcname=f"{base}/{rel}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        meta = _metadata()
        info.size = len(meta)
        tar.addfile(info, io.BytesIO(meta))
    return name
