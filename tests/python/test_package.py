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


def test_import_functions_read_every_call_form_as_their_signature_says():
    # `as_cuda_array(obj)`, `as_array(obj)` and `from_cuda_array_interface(desc)` are read
    # by cai itself; every other call goes to the full argument reader. Both must agree
    # with the signature.
    import inspect
    import pickle

    import numpy as np
    import pytest
    from producers import Producer, cai_dict

    assert str(inspect.signature(cai.as_cuda_array)) == (
        "(obj, *, sync=True, stream=None, policy=None, check_pointers=None, allow_other_device=False)"
    )
    assert str(inspect.signature(cai.as_array)) == "(obj)"
    assert str(inspect.signature(cai.from_cuda_array_interface)) == (
        "(desc, owner=None, *, sync=True, stream=None, policy=None, check_pointers=None, allow_other_device=False)"
    )
    for f in (cai.as_cuda_array, cai.as_array, cai.from_cuda_array_interface):
        assert f.__module__ == "cai._cai" and f.__doc__.startswith(("Reads `obj.", "The same as `as_cuda_array`"))
        assert pickle.loads(pickle.dumps(f)) is f
    p, arr = Producer(cai_dict()), np.arange(3.0)
    assert cai.as_cuda_array(p).ptr == cai.as_cuda_array(obj=p).ptr == cai.as_cuda_array(*[p], sync=False).ptr
    assert cai.as_array(arr).ptr == cai.as_array(obj=arr).ptr == arr.ctypes.data
    d = cai_dict()
    alone, named, owned = (
        cai.from_cuda_array_interface(d),
        cai.from_cuda_array_interface(desc=d),
        cai.from_cuda_array_interface(d, p, sync=False),
    )
    assert alone.ptr == named.ptr == owned.ptr == d["data"][0]
    assert alone.owner is None and named.owner is None and owned.owner is p
    errors = [
        (lambda: cai.as_cuda_array(), "as_cuda_array() missing 1 required positional argument: 'obj'"),
        (lambda: cai.as_cuda_array(p, p), "as_cuda_array() takes 1 positional arguments but 2 were given"),
        (lambda: cai.as_cuda_array(p, bogus=1), "as_cuda_array() got an unexpected keyword argument 'bogus'"),
        (lambda: cai.as_cuda_array(p, obj=p), "as_cuda_array() got multiple values for argument 'obj'"),
        (lambda: cai.as_array(), "as_array() missing 1 required positional argument: 'obj'"),
        (lambda: cai.as_array(arr, arr), "as_array() takes 1 positional arguments but 2 were given"),
        (lambda: cai.as_array(arr, sync=True), "as_array() got an unexpected keyword argument 'sync'"),
        (
            lambda: cai.from_cuda_array_interface(),
            "from_cuda_array_interface() missing 1 required positional argument: 'desc'",
        ),
        (
            lambda: cai.from_cuda_array_interface(d, p, p),
            "from_cuda_array_interface() takes from 1 to 2 positional arguments but 3 were given",
        ),
        (
            lambda: cai.from_cuda_array_interface(d, bogus=1),
            "from_cuda_array_interface() got an unexpected keyword argument 'bogus'",
        ),
    ]
    for call, message in errors:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value) == message
    # The one-argument form reports the producer's problems as the full one does.
    for call in (lambda: cai.as_cuda_array(1), lambda: cai.as_cuda_array(1, sync=True)):
        with pytest.raises(TypeError, match="__cuda_array_interface__: objects of type 'int' do not export it"):
            call()
    for call in (lambda: cai.from_cuda_array_interface({}), lambda: cai.from_cuda_array_interface({}, None)):
        with pytest.raises(TypeError, match="version: required key is missing"):
            call()


def test_stub_classes_are_the_runtime_classes():
    # Every class the stub declares exists at runtime with the bases it declares, except
    # a typing-only Protocol; a class marked @final cannot be subclassed at runtime.
    import ast
    import builtins

    import pytest

    import cai._cai as ext

    tree = ast.parse((package_dir() / "_cai.pyi").read_text())
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    protocols = {n.name for n in classes if any(isinstance(b, ast.Name) and b.id == "Protocol" for b in n.bases)}
    assert len(classes) > len(protocols)
    for node in classes:
        if node.name in protocols:
            assert not hasattr(ext, node.name), node.name
            continue
        runtime = getattr(ext, node.name)
        for base in (b.id for b in node.bases if isinstance(b, ast.Name) and b.id not in protocols):
            assert issubclass(runtime, getattr(ext, base, None) or getattr(builtins, base)), (node.name, base)
        if any(isinstance(d, ast.Name) and d.id == "final" for d in node.decorator_list):
            with pytest.raises(TypeError):
                type("Sub", (runtime,), {})


def test_stub_declares_every_public_member_of_the_views():
    # What a view offers at runtime beyond `object`'s members is in the stub (the shared
    # `_View` protocol or the class itself), so that type checkers and readers see it.
    import ast

    import cai._cai as ext

    tree = ast.parse((package_dir() / "_cai.pyi").read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def members(node):
        return {n.name for n in node.body if isinstance(n, ast.FunctionDef)}

    for name in ("CudaArray", "HostArray"):
        declared = members(classes["_View"]) | members(classes[name])
        runtime = set(dir(getattr(ext, name))) - set(dir(object)) - {"__module__"}
        assert runtime - declared == set(), name
        assert declared - runtime == set(), name
