"""The in-tree build backend (_backend/kestrel_build.py): the wheel pip
installs carries every module of the package and a RECORD whose hashes
match, the editable wheel points at this folder, the sdist holds what a
rebuild needs."""

import base64
import hashlib
import importlib
import pathlib
import sys
import tarfile
import tempfile
import unittest
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_backend"))
backend = importlib.import_module("kestrel_build")


class BuildBackendTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = pathlib.Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_nothing_to_fetch(self):
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        self.assertEqual(backend.get_requires_for_build_editable(), [])
        self.assertEqual(backend.get_requires_for_build_sdist(), [])

    def test_wheel_holds_the_package_and_a_matching_record(self):
        name = backend.build_wheel(str(self.out))
        self.assertRegex(name, r"^kestrel-\d+\.\d+\.\d+-py3-none-any\.whl$")
        with zipfile.ZipFile(self.out / name) as z:
            names = set(z.namelist())
            modules = {f"kestrel/{p.name}" for p in (ROOT / "kestrel").glob("*.py")}
            self.assertTrue(modules <= names, modules - names)
            dist = name.split("-py3")[0] + ".dist-info"
            self.assertIn(f"{dist}/METADATA", names)
            self.assertIn("Name: kestrel", z.read(f"{dist}/METADATA").decode())
            self.assertIn("Root-Is-Purelib: true", z.read(f"{dist}/WHEEL").decode())
            rows = [r.split(",") for r in z.read(f"{dist}/RECORD").decode().splitlines()]
            self.assertEqual({r[0] for r in rows}, names)
            for path, digest, size in rows:
                if path.endswith("RECORD"):
                    continue
                data = z.read(path)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual((digest, size), (f"sha256={want}", str(len(data))), path)

    def test_editable_wheel_points_here(self):
        name = backend.build_editable(str(self.out))
        with zipfile.ZipFile(self.out / name) as z:
            self.assertEqual(z.read("kestrel.pth").decode().strip(), str(ROOT))

    def test_sdist_can_be_built_again(self):
        name = backend.build_sdist(str(self.out))
        with tarfile.open(self.out / name) as tar:
            names = {n.split("/", 1)[1] for n in tar.getnames()}
        self.assertTrue({"pyproject.toml", "_backend/kestrel_build.py", "kestrel/__init__.py",
                         "PKG-INFO"} <= names, names)


if __name__ == "__main__":
    unittest.main()
