"""The installed package: public names, type stubs, py.typed."""

import pathlib
import re

import cai


def package_dir():
    return pathlib.Path(cai.__file__).parent


def test_py_typed_and_stubs_are_shipped():
    assert (package_dir() / "py.typed").exists()
    assert (package_dir() / "_cai.pyi").exists()


def test_stubs_cover_every_public_name_and_property():
    stub = (package_dir() / "_cai.pyi").read_text()
    for name in cai.__all__:
        assert re.search(rf"\b{name}\b", stub), name
    for cls in (cai.CudaArray, cai.HostArray):
        public = {n for n in dir(cls) if not n.startswith("_")}
        for name in public:
            assert re.search(rf"def {name}\(", stub), f"{cls.__name__}.{name} has no stub"


def test_classes_live_in_the_cai_module():
    assert cai.CudaArray.__module__ == "cai" and cai.HostArray.__module__ == "cai"
    assert issubclass(cai.CudaDriverError, RuntimeError)
    assert isinstance(cai.__version__, str)
