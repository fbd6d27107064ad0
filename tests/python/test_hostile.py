"""Hostile producers: Python code that runs while cai reads an interface (an `__index__`,
a `__repr__`, a property, a warnings hook) and changes or frees what cai reads, recursion
through properties and masks, exceptions that must propagate, and the extractors' overlap
check across threads and re-entry.

Each scenario runs in a fresh interpreter, so that a crash is a failed test, not a dead
test run. `scripts/test` runs this module against the debug build and again against the
release build.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

import cai

HERE = os.path.dirname(__file__)

PRELUDE = textwrap.dedent(
    """
    import gc, sys, threading, warnings
    import cai, cai_fixtures as fx

    PTR = 0x7F0000000000

    class P:
        '''A producer whose property returns the global `d` (or what `get` returns).'''
        def __init__(self, get=None, host=False):
            self.get = get or (lambda: d)
            self.host = host
        @property
        def __cuda_array_interface__(self):
            if self.host:
                raise AttributeError("__cuda_array_interface__")
            return self.get()
        @property
        def __array_interface__(self):
            if not self.host:
                raise AttributeError("__array_interface__")
            return self.get()

    def outcome(call):
        try:
            r = call()
        except Exception as e:
            return type(e).__name__
        gc.collect()
        return "ok" if not isinstance(r, list) else f"findings:{len(r)}"

    def kind(call):
        '''The class name of what the call raises, `BaseException`s included ("ok" if none).'''
        try:
            call()
        except BaseException as e:
            return type(e).__name__
        return "ok"

    def first(call):
        '''`Class: message` of the exception the call raises (None if it raises none).'''
        try:
            call()
        except Exception as e:
            return f"{type(e).__name__}: {e}"

    def deep(call, show=first):
        '''`show(call)`, run with the recursion limit at 100,000 in a thread with a 64 MB
        stack: deep enough that only cai's nesting limit, not Python's, ends a recursion.'''
        sys.setrecursionlimit(100000)
        threading.stack_size(64 << 20)
        result = []
        t = threading.Thread(target=lambda: result.append(show(call)))
        t.start(); t.join()
        return result[0]

    def entries(make):
        '''The outcome of every entry point on a fresh hostile dict from `make()`.'''
        global d
        out = {}
        for name, call in [
            ("as_cuda_array", lambda: cai.as_cuda_array(P())),
            ("from_cuda_array_interface", lambda: cai.from_cuda_array_interface(d)),
            ("validate", lambda: cai.validate(P())),
            ("extractor", lambda: fx.describe_f32(P())),
        ]:
            d = make()
            out[name] = outcome(call)
        d = make()
        out["as_array"] = outcome(lambda: cai.as_array(P(host=True)))
        d = make()
        host = outcome(lambda: tuple(fx.host_shape_f32(P(host=True))))
        if host != out["as_array"]:  # the host extractor reads as as_array does
            out["host_extractor"] = host
        return out
    """
)


def run(code, timeout=120, prelude=PRELUDE):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    # The pointers and streams here are made up: no driver may touch them.
    env.update(CAI_CHECK_POINTERS="0", CAI_IMPORT_SYNC="ignore", PYTHONFAULTHANDLER="1")
    r = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=HERE, env=env, capture_output=True, text=True, timeout=timeout
    )
    output = r.stdout + r.stderr
    assert r.returncode == 0, f"the interpreter died or failed (exit {r.returncode}):\n{output[-4000:]}"
    assert "PanicException" not in output and "panicked" not in output, output[-4000:]
    return r.stdout


def results(code, prelude=PRELUDE):
    """The dict the scenario prints last."""
    lines = run(code, prelude=prelude).strip().splitlines()
    return eval(lines[-1])  # noqa: S307 - our own subprocess's repr of a dict


# -- the dict changes or goes away while it is read -------------------------------------------

CLEARING = {
    "version": "{'version': Clear(3), 'shape': (n, 5), 'typestr': '<f' + str(n), 'data': (PTR + n, False)}",
    "shape item": "{'version': 3, 'shape': (Clear(n), 5), 'typestr': '<f' + str(n), 'data': (PTR + n, False)}",
    "data pointer": "{'version': 3, 'shape': (n, 5), 'typestr': '<f' + str(n), 'data': (Clear(PTR + n), False)}",
    "strides item": "{'version': 3, 'shape': (n, 5), 'typestr': '<f' + str(n), 'data': (PTR + n, False), 'strides': (Clear(20), 4)}",
    "stream": "{'version': 3, 'shape': (n, 5), 'typestr': '<f' + str(n), 'data': (PTR + n, False), 'stream': Clear(7)}",
}


@pytest.mark.parametrize("where", list(CLEARING))
def test_an_index_that_clears_the_dict(where):
    # The values are computed, so that clearing the dict frees them: the issue's reproducer.
    out = results(
        f"""
        class Clear:
            def __init__(self, v): self.v = v
            def __index__(self):
                d.clear(); gc.collect()
                return self.v
        n = 4
        print(entries(lambda: {CLEARING[where]}))
        """
    )
    # What was read before the dict changed is what counts: every entry point succeeds.
    expected = {"as_cuda_array": "ok", "from_cuda_array_interface": "ok", "validate": "findings:0", "extractor": "ok", "as_array": "ok"}
    if where == "stream":
        expected["as_array"] = "ok"  # NumPy's interface has no stream: the key is ignored
    assert out == expected


def test_a_repr_that_clears_the_dict_while_a_message_is_formatted():
    out = results(
        """
        class Loud:
            def __repr__(self):
                d.clear(); gc.collect()
                return "<loud>"
        print(entries(lambda: {"version": 3, "shape": (4,), "typestr": Loud(), "data": (PTR + 4, False)}))
        """
    )
    assert out == {"as_cuda_array": "TypeError", "from_cuda_array_interface": "TypeError", "validate": "findings:1", "extractor": "TypeError", "as_array": "TypeError"}


def test_a_descr_entry_whose_repr_clears_the_dict():
    out = results(
        """
        class Loud:
            def __repr__(self):
                d.clear(); gc.collect()
                return "<loud>"
        make = lambda: {"version": 3, "shape": (4,), "typestr": "|V8", "data": (PTR, False), "descr": [("a", "<f4"), Loud()]}
        print(entries(make))
        """
    )
    assert out == {"as_cuda_array": "ValueError", "from_cuda_array_interface": "ValueError", "validate": "findings:1", "extractor": "ValueError", "as_array": "ValueError"}


def test_a_sub_array_type_whose_shape_frees_its_own_entry():
    # The (type, shape) pair of a field's type is held while its shape's `__index__` empties
    # the descr list and the dict, which drop the pair's last other references.
    out = results(
        """
        class Clear:
            def __index__(self):
                del descr[:]; d.clear(); gc.collect()
                return 2
        n = 4
        def make():
            global descr
            descr = [("a", ("<f" + str(n), (Clear(),)), (1,))]
            return {"version": 3, "shape": (4,), "typestr": "|V8", "data": (PTR, False), "descr": descr}
        print(entries(make))
        """
    )
    assert out == {
        "as_cuda_array": "ok", "from_cuda_array_interface": "ok", "validate": "findings:0", "extractor": "TypeError",
        "as_array": "ok", "host_extractor": "TypeError",
    }


def test_a_warnings_hook_that_clears_the_dict():
    out = results(
        """
        warnings.simplefilter("always")
        def hook(*args, **kwargs):
            d.clear(); gc.collect()
        warnings.showwarning = hook
        n = 4
        print(entries(lambda: {"version": 4, "shape": (n, 5), "typestr": "<f" + str(n), "data": (PTR + n, False), "stream": None}))
        """
    )
    assert out["as_cuda_array"] == out["from_cuda_array_interface"] == out["extractor"] == "ok"
    assert out["validate"] == "findings:1"  # the notice that version 4 is read by 3's rules


def test_a_mask_property_that_clears_the_outer_dict():
    out = results(
        """
        class Mask:
            @property
            def __cuda_array_interface__(self):
                d.clear(); gc.collect()
                return {"version": 3, "shape": (4,), "typestr": "|b1", "data": (PTR + 4096, False)}
        n = 4
        print(entries(lambda: {"version": 3, "shape": (n,), "typestr": "<f" + str(n), "data": (PTR + n, False), "mask": Mask()}))
        """
    )
    assert out["as_cuda_array"] == out["from_cuda_array_interface"] == "ok"
    assert out["validate"] == "findings:0"


def test_a_mapping_that_changes_while_it_is_copied():
    out = results(
        """
        from collections.abc import Mapping
        class Shifty(Mapping):
            def __init__(self): self.calls = 0
            def __getitem__(self, k):
                self.calls += 1
                return {"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}[k]
            def __iter__(self): return iter(["version", "shape", "typestr", "data"])
            def __len__(self):
                gc.collect()
                return 4
        print(entries(Shifty))
        """
    )
    # Given to cai, a mapping is read through a copy; as a producer's attribute it is refused
    # (NumPy and PyTorch read only dicts), and validate says so and reads it all the same.
    assert out == {
        "as_cuda_array": "TypeError",
        "from_cuda_array_interface": "ok",
        "validate": "findings:1",
        "extractor": "TypeError",
        "as_array": "TypeError",
    }


def test_a_producer_freed_by_its_own_index():
    out = results(
        """
        class Ghost:
            def __index__(self):
                global holder
                holder = None; gc.collect()
                return 4
        holder = None
        def make():
            global holder
            holder = {"version": 3, "shape": (Ghost(),), "typestr": "<f" + str(4), "data": (PTR + 4, False)}
            return holder
        print(entries(make))
        """
    )
    assert set(out.values()) <= {"ok", "findings:0"}


# -- recursion -------------------------------------------------------------------------------------


def test_a_property_that_validates_itself_ends_in_recursion_error():
    out = run(
        """
        class R:
            __cuda_array_interface__ = property(lambda s: cai.validate(s))
        print(outcome(lambda: cai.validate(R())))
        """
    )
    assert out.split() == ["RecursionError"]


def test_masks_that_never_end_are_a_finding_of_validate_and_recursion_error_elsewhere():
    # The masks themselves nest (no producer code calls cai again): `validate` reports it,
    # once; the imports end in cai's own RecursionError.
    out = results(
        """
        out = {}
        base = {"version": 3, "shape": (4,), "typestr": "|b1", "data": (PTR, False)}
        class Itself:
            @property
            def __cuda_array_interface__(self):
                return dict(base, mask=self)
        class Endless:
            @property
            def __cuda_array_interface__(self):
                return dict(base, mask=Endless())
        for name, obj in [("itself", Itself()), ("endless", Endless())]:
            out[name] = cai.validate(obj)
            out[name + " import"] = first(lambda: cai.as_cuda_array(obj))
        # Inside 60 nested imports, the limit is reached by the producers' recursion, not
        # by the masks alone: RecursionError, as from the imports.
        def nested(depth):
            class Deep:
                @property
                def __cuda_array_interface__(self):
                    if depth == 0:
                        out["nested"] = first(lambda: cai.validate(Itself()))
                        return base
                    return cai.as_cuda_array(nested(depth - 1)).__cuda_array_interface__
            return Deep()
        cai.as_cuda_array(nested(60))
        print(out)
        """
    )
    finding = (
        "mask: masks nest deeper than cai reads (64 nested interfaces): a mask that is its own array, "
        "or a chain of masks that does not end"
    )
    for name in ("itself", "endless"):
        assert out[name] == [finding], name
        assert out[name + " import"].startswith("RecursionError: maximum recursion depth exceeded"), name
    assert out["nested"].startswith("RecursionError: maximum recursion depth exceeded"), out["nested"]


@pytest.mark.parametrize("entry", ["validate", "as_cuda_array"])
@pytest.mark.parametrize("levels", [1, 2, 3, 4])
def test_a_mask_deep_down_that_validates_the_outer_object_ends_in_recursion_error_at_once(entry, levels):
    # Whichever read meets cai's limit, a recursion through the producer's code is a
    # RecursionError, met once (each mask is read twice by validate: no doubling per level).
    out = results(
        f"""
        import time
        base = {{"version": 3, "shape": (4,), "typestr": "|b1", "data": (PTR, False)}}
        calls = [0]
        class Mask:
            def __init__(self, level): self.level = level
            @property
            def __cuda_array_interface__(self):
                calls[0] += 1
                if self.level == {levels}:
                    cai.{entry}(Outer())
                    return base
                return dict(base, mask=Mask(self.level + 1))
        class Outer:
            @property
            def __cuda_array_interface__(self):
                return dict(base, mask=Mask(1))
        start = time.perf_counter()
        out = {{"outcome": first(lambda: cai.{entry}(Outer())), "calls": calls[0]}}
        out["seconds"] = time.perf_counter() - start
        print(out)
        """,
    )
    assert out["outcome"].startswith("RecursionError: maximum recursion depth exceeded"), out
    assert out["calls"] <= 64, out


def test_a_type_whose_name_raises_keyboard_interrupt_propagates_from_flag_arguments():
    # A Python class is never NumPy's bool (a static type), so its module is not read; its
    # name is, for the message.
    out = results(
        """
        class Meta(type):
            @property
            def __module__(cls):
                raise AssertionError("a Python class's module is not read")
            @property
            def __name__(cls):
                raise KeyboardInterrupt
        class Flag(metaclass=Meta):
            pass
        out = {}
        for name, call in [("configure", lambda: cai.configure(check_pointers=Flag())),
                           ("sync", lambda: cai.as_cuda_array(P(), sync=Flag())),
                           ("copy", lambda: cai.from_dlpack(P(), copy=Flag()))]:
            try:
                call()
                out[name] = "no error"
            except KeyboardInterrupt:
                out[name] = "KeyboardInterrupt"
            except Exception as e:
                out[name] = type(e).__name__
        print(out)
        """
    )
    assert set(out.values()) == {"KeyboardInterrupt"}, out


@pytest.mark.parametrize("entry", ["as_cuda_array", "validate", "extractor"])
def test_a_mask_that_imports_the_outer_object_ends_in_recursion_error(entry):
    out = run(
        f"""
        class Outer:
            @property
            def __cuda_array_interface__(self):
                return {{"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False), "mask": Mask()}}
        class Mask:
            @property
            def __cuda_array_interface__(self):
                cai.as_cuda_array(Outer())
                return {{"version": 3, "shape": (4,), "typestr": "|b1", "data": (PTR, False)}}
        call = {{"as_cuda_array": lambda: cai.as_cuda_array(Outer()), "validate": lambda: cai.validate(Outer()),
                "extractor": lambda: fx.describe_f32(Outer())}}["{entry}"]
        print(outcome(call))
        """
    )
    assert out.split() == ["RecursionError"]


def test_deep_recursion_at_a_high_recursion_limit_does_not_overflow_the_c_stack():
    out = run(
        """
        class R:
            __cuda_array_interface__ = property(lambda s: cai.as_cuda_array(s))
        print(deep(lambda: cai.as_cuda_array(R()), outcome))
        """
    )
    assert out.split() == ["RecursionError"]


@pytest.mark.parametrize("entry", ["from_dlpack", "host extractor"])
def test_a_dlpack_export_that_imports_itself_ends_in_recursion_error(entry):
    # Each level is a `__dlpack__` frame that imports its own object again; with the
    # recursion limit raised and a big thread stack, only cai's nesting limit stops it.
    out = run(
        f"""
        class D:
            def __dlpack_device__(self): return (1, 0)
            def __dlpack__(self, **kwargs): return call(self)
        call = {{"from_dlpack": cai.from_dlpack, "host extractor": fx.host_describe}}["{entry}"]
        print(deep(lambda: call(D())) or "ok")
        """
    )
    # The extractor looks for `__array_interface__` before `__dlpack__`: the innermost
    # read may be either.
    assert re.fullmatch(
        r"RecursionError: maximum recursion depth exceeded while reading (__dlpack__|__array_interface__) "
        r"\(64 nested reads\)",
        out.strip(),
    )


# Arguments whose own code calls cai again with the same argument, at a recursion limit
# that Python's own check does not reach first: each ends in cai's nesting limit, not in a
# C stack overflow. (The repr cases end as a TypeError: past the limit, the innermost
# repr shows as a placeholder, its call raises the TypeError it words, and each repr
# around it raises that TypeError in turn.)
AGAIN = {
    "stream __index__": ("class S:\n    def __index__(self): return again()", "cai.as_cuda_array(Q(), stream=S())"),
    "__cuda_stream__": ("class S:\n    def __cuda_stream__(self): return (0, again())", "cai.as_cuda_array(Q(), stream=S())"),
    "from_dlpack stream": ("class S:\n    def __index__(self): return again()", "cai.from_dlpack(V, stream=S())"),
    "max_version": ("class S:\n    def __index__(self): return again()", "V.__dlpack__(max_version=(S(), 0))"),
    "dl_device": ("class S:\n    def __index__(self): return again()", "V.__dlpack__(dl_device=(S(), 0))"),
    "pointer_attributes": ("class S:\n    def __index__(self): return again()", "cai.pointer_attributes(S())"),
    "export_version": ("class S:\n    def __index__(self): return again()", "cai.configure(export_version=S())"),
    "policy repr": ("class S:\n    def __repr__(self): return str(again())", "cai.as_cuda_array(Q(), policy=S())"),
    "extractor repr": ("class S:\n    def __repr__(self): return str(again())", "fx.describe_f32(S())"),
    "type name": (
        "class M(type):\n    @property\n    def __name__(cls): return str(again())\nclass S(metaclass=M): pass",
        "cai.as_cuda_array(Q(), sync=S())",
    ),
    "__dlpack__ property": (
        "class S:\n    @property\n    def __dlpack__(self): return again()",
        "fx.describe_f32(S())",
    ),
    "warnings hook": (
        "import warnings\nwarnings.simplefilter('always')\nwarnings.showwarning = lambda *a, **k: again()\nclass S: pass",
        "cai.as_cuda_array(Q(), check_pointers=True)",
    ),
    # A writable host argument is checked for a NumPy scalar: `numpy.generic` is looked up
    # in whatever `sys.modules['numpy']` is.
    "numpy.generic lookup": (
        "import types\n"
        "class FakeNumpy(types.ModuleType):\n"
        "    def __getattr__(self, name):\n"
        "        if name == 'generic': again()\n"
        "        raise AttributeError(name)\n"
        "sys.modules['numpy'] = FakeNumpy('numpy')\n"
        "class S: __array_interface__ = {'version': 3, 'shape': (4,), 'typestr': '<f8', 'data': (PTR, False)}",
        "fx.host_hold(S(), lambda: None)",
    ),
}


@pytest.mark.parametrize("where", list(AGAIN))
def test_an_argument_that_calls_cai_again_ends_in_the_nesting_limit(where):
    if where == "warnings hook" and cai.cuda_driver_present():
        pytest.skip("the warning is for machines without a CUDA driver")
    define, call = AGAIN[where]
    out = run(
        f"""
        import numpy as np
        class Q:
            __cuda_array_interface__ = {{"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}}
        V = cai.as_array(np.zeros(4, np.float32))
        def again():
            return {call}
        {textwrap.indent(define, " " * 8).strip()}
        print(deep(again) or "ok")
        """
    )
    if "repr" in where:
        assert out.startswith("TypeError: "), out
    else:
        # cai's limit, not Python's.
        assert re.fullmatch(r"RecursionError: maximum recursion depth exceeded while reading .* \(\d+ nested reads\)\n", out), out


# Code that cai runs for each of several values and that calls cai again once (cai
# multiplies it: the `__repr__` and type `__name__` that a message quotes, the `__index__`
# of each shape item, the `__str__` of each failure a validation words), and code that
# calls cai twice by itself (a property, a mask's, a stream object's `__index__`). The
# depth limit alone would let each make 3^64 or 2^64 calls. Where the code sits, and how
# many calls it makes.
BRANCHING = {
    "repr": ("d['shape'] = R(); d['typestr'] = R(); d['data'] = R()", 1),
    "type name": ("d['shape'] = N(); d['typestr'] = N(); d['data'] = N()", 1),
    "keys": ("d.update({R(): 0, R(): 1, R(): 2})", 1),
    "descr": ("d['typestr'] = '|V12'; d['descr'] = [('a', R()), ('b', R()), ('c', R())]", 1),
    "index": ("d['shape'] = (I(), I(), I())", 1),
    "exception text": ("d['shape'] = (F(), F(), F()); d['strides'] = (F(), F(), F())", 1),
    "property": ("", 2),
    "mask": ("d['mask'] = M()", 2),
    "stream": ("d['stream'] = I()", 2),
}


@pytest.mark.parametrize("where", list(BRANCHING))
def test_code_that_calls_cai_again_from_several_values_is_bounded(where):
    # Before the count, each of these ran for hours (a validate whose three bad keys'
    # reprs validate again made 4 million calls in 8 s and went on).
    hook, times = BRANCHING[where]
    out = results(
        f"""
        import time
        calls = [0]
        def again():
            calls[0] += 1
            for _ in range({times}):
                try:
                    entry()
                except Exception:
                    pass
        class R:
            def __repr__(self): again(); return "R"
        class Named(type):
            @property
            def __name__(cls): again(); return "N"
        class N(metaclass=Named):
            def __repr__(self): return "N"
        class I:
            def __index__(self): again(); return 4
        class Failure(Exception):
            def __str__(self): again(); return "failed"
        class F:
            def __index__(self): raise Failure()
        class M:
            @property
            def __cuda_array_interface__(self):
                again()
                return {{"shape": (4,), "typestr": "|b1", "data": (PTR, False), "version": 3}}
        def make():
            d = {{"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3}}
            {hook if where != "property" else "pass"}
            return d
        def H():
            return P({"lambda: again() or make()" if where == "property" else "make"})
        out = {{}}
        for name, call in [
            ("validate", lambda: cai.validate(H())),
            ("validate dict", lambda: cai.validate(make())),
            ("as_cuda_array", lambda: cai.as_cuda_array(H())),
            ("from_cuda_array_interface", lambda: cai.from_cuda_array_interface(make())),
            ("extractor", lambda: fx.describe_f32(H())),
        ]:
            entry = call
            calls[0] = 0
            t = time.perf_counter()
            outcome = deep(call, show=kind)
            out[name] = (outcome, calls[0], time.perf_counter() - t)
        print(out)
        """
    )
    for name, (outcome, calls, seconds) in out.items():
        assert outcome in {"ok", "TypeError", "ValueError", "RecursionError"}, (name, out)
        # 65,536 levels entered three or more deep, and those less deep.
        assert calls <= 4 * 65536 and seconds < 60, (name, out)
    # The recursion branches past what the depth limit allows in a line (64 levels), and
    # the count is what ends it.
    assert max(calls for _, calls, _ in out.values()) >= 4096, out



# -- exceptions that must propagate unchanged ----------------------------------------------------


@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit", "MemoryError", "GeneratorExit"])
@pytest.mark.parametrize("where", ["__index__", "__repr__", "property", "mask property", "descr entry __repr__"])
def test_exceptions_that_are_not_ordinary_propagate_unchanged(exc, where):
    code = f"""
        class Boom:
            def __index__(self): raise {exc}("boom")
            def __repr__(self): raise {exc}("boom")
        class Mask:
            @property
            def __cuda_array_interface__(self): raise {exc}("boom")
        base = {{"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}}
        where = "{where}"
        def make():
            if where == "__index__": return dict(base, version=Boom())
            if where == "__repr__": return dict(base, typestr=Boom())
            if where == "mask property": return dict(base, mask=Mask())
            if where == "descr entry __repr__": return dict(base, typestr="|V8", descr=[("a", "<f4"), Boom()])
            return None
        def raising():
            raise {exc}("boom")
        out = {{}}
        for name, call in [
            ("as_cuda_array", lambda: cai.as_cuda_array(P(get=raising if where == "property" else make))),
            ("validate", lambda: cai.validate(P(get=raising if where == "property" else make))),
            ("extractor", lambda: fx.describe_f32(P(get=raising if where == "property" else make))),
            ("as_array", lambda: cai.as_array(P(get=raising if where == "property" else make, host=True))),
        ]:
            try:
                call()
                out[name] = "no exception"
            except BaseException as e:
                out[name] = type(e).__name__ + ":" + str(e)
        print(out)
        """
    out = results(code)
    if where == "mask property":
        del out["as_array"]  # NumPy's interface: cai reads masks of the CUDA interface only
    assert set(out.values()) == {f"{exc}:boom"}, out


@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit", "MemoryError"])
def test_a_dlpack_device_that_raises_propagates_from_a_host_extractor(exc):
    # The host extractor asks whether a failed DLPack read was a driver error, which may
    # import the cai package: an import that raises must not replace the producer's own.
    out = results(
        f"""
        import builtins
        class Producer:
            def __dlpack__(self, **kwargs): raise RuntimeError("not reached")
            def __dlpack_device__(self): raise {exc}("mine")
        real = builtins.__import__
        def hook(name, *args, **kwargs):
            if name == "cai":
                raise SystemExit("the import hook's")
            return real(name, *args, **kwargs)
        builtins.__import__ = hook
        try:
            fx.host_sum(Producer())
            out = "no exception"
        except BaseException as e:
            out = type(e).__name__ + ":" + str(e)
        builtins.__import__ = real
        print({{"out": out}})
        """
    )
    assert out == {"out": f"{exc}:mine"}


# -- validate's contract -----------------------------------------------------------------------------


def test_validate_reports_every_problem_of_an_object_with_an_interface():
    out = results(
        """
        class BadKey(str):
            def __repr__(self): raise ValueError("no repr")
        class BadMask:
            @property
            def __cuda_array_interface__(self): raise ValueError("mask broke")
        import collections.abc
        class RaisingMapping(collections.abc.Mapping):
            def __getitem__(self, k): raise KeyError(k)
            def __len__(self): return 1
            def __iter__(self): raise ValueError("no keys")
            def __repr__(self): return "<raising mapping>"
        base = {"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}
        print({
            "not a dict": cai.validate(P(get=lambda: [1, 2])),
            "raising mask": cai.validate(P(get=lambda: dict(base, mask=BadMask()))),
            "key with a raising repr": cai.validate(P(get=lambda: dict(base, **{BadKey("extra"): 1}))),
            "raising property": cai.validate(P(get=lambda: 1 / 0)),
            "raising mapping": cai.validate(P(get=RaisingMapping)),
            "raising mapping as_cuda_array": outcome(lambda: cai.as_cuda_array(P(get=RaisingMapping))),
            "no interface": outcome(lambda: cai.validate(object())),
        })
        """
    )
    assert out["not a dict"] == ["__cuda_array_interface__: expected a dict, received [1, 2] (list)"]
    assert out["raising mask"] == ["mask: reading __cuda_array_interface__ raised ValueError: mask broke"]
    assert out["key with a raising repr"] == [
        "__cuda_array_interface__: key <repr() raised ValueError> is not defined by any version of the interface"
    ]
    assert out["raising mapping"] == [
        "__cuda_array_interface__: expected a dict, received <raising mapping> (RaisingMapping)",
        "__cuda_array_interface__: reading <raising mapping> (RaisingMapping) as a mapping raised ValueError: no keys",
    ]
    assert out["raising mapping as_cuda_array"] == "TypeError"
    assert out["raising property"] == ["__cuda_array_interface__: reading the attribute raised ZeroDivisionError: division by zero"]
    assert out["no interface"] == "TypeError"


# -- values too deep, too long or too many to print ---------------------------------------------------


def test_values_too_deep_to_repr_make_the_key_s_error():
    # Python's repr of these raises RecursionError; the message shows their start instead.
    out = results(
        """
        deep_list = []
        for _ in range(100_000):
            deep_list = [deep_list]
        deep_dict = {}
        for _ in range(100_000):
            deep_dict = {"k": deep_dict}
        deep_descr = []
        for _ in range(5_000):
            deep_descr = [("a", deep_descr)]
        import collections.abc
        class DeepMapping(collections.abc.Mapping):
            # A mapping whose reading raises an exception too deep to print.
            def __getitem__(self, k): raise KeyError(k)
            def __len__(self): return 1
            def __iter__(self): raise ValueError(deep_list)
        class DeepMask:
            __cuda_array_interface__ = DeepMapping()
        base = {"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}
        print({
            "shape": first(lambda: cai.as_cuda_array(P(get=lambda: dict(base, shape=deep_list)))),
            "strides": first(lambda: cai.from_cuda_array_interface(dict(base, strides=(deep_dict,)))),
            "descr": first(lambda: cai.as_cuda_array(P(get=lambda: dict(base, typestr="|V4", descr=deep_descr)))),
            "validate": cai.validate(P(get=lambda: dict(base, shape=deep_list, data=deep_dict))),
            "extractor": first(lambda: fx.describe_f32(P(get=lambda: dict(base, shape=deep_list)))),
            "mapping raising a deep exception": first(lambda: cai.from_cuda_array_interface(DeepMapping())),
            "mask raising a deep exception": cai.validate(P(get=lambda: dict(base, mask=DeepMask()))),
        })
        """
    )
    assert out["shape"] == "TypeError: shape: expected a tuple of non-negative ints, received " + "[" * 80 + "... (list)"
    assert out["strides"].startswith("TypeError: strides: ") and "{'k': {'k': " in out["strides"]
    assert out["descr"].startswith("ValueError: descr: [('a', [('a', ") and "nest deeper than" in out["descr"]
    assert [f.split(":")[0] for f in out["validate"]] == ["shape", "data"]
    assert out["extractor"].startswith("TypeError: shape: ")
    assert out["mapping raising a deep exception"].startswith("TypeError: __cuda_array_interface__: reading ")
    assert out["mapping raising a deep exception"].endswith(" as a mapping raised ValueError")
    # A mask's interface that is a mapping but no dict: refused as such, and read as one.
    not_a_dict, reading = out["mask raising a deep exception"]
    assert not_a_dict.startswith("mask: __cuda_array_interface__: expected a dict, received <")
    assert not_a_dict.endswith(" (DeepMapping)")
    assert reading.startswith("mask: __cuda_array_interface__: reading ") and reading.endswith(" as a mapping raised ValueError")


def test_a_container_is_shown_by_its_start_and_survives_its_items_reprs():
    out = results(
        """
        class Shrink:
            # A repr that empties the container being printed and frees its items.
            def __repr__(self):
                victim.clear(); gc.collect()
                return "<shrink>"
        class Interrupt:
            def __repr__(self): raise KeyboardInterrupt
        class Deep:
            def __repr__(self): raise RecursionError("too deep")
        class Long:
            def __repr__(self): return "x" * 10**7
        class Lines:
            def __repr__(self): return "a\\n\\n   b"
        holds_itself = [1]
        holds_itself.append(holds_itself)
        holds_itself.append({"me": holds_itself})
        base = {"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}
        def message(**bad):
            try:
                cai.from_cuda_array_interface(dict(base, **bad))
            except Exception as e:
                return f"{type(e).__name__}: {e}"
        victim = [Shrink(), object(), object()]
        as_list = message(shape=victim)
        victim = {"a": Shrink(), "b": object(), "c": object()}
        as_dict = message(shape=victim)
        try:
            message(shape=[1, Interrupt()])
            interrupt = "swallowed"
        except KeyboardInterrupt:
            interrupt = "KeyboardInterrupt"
        print({
            "list": as_list,
            "dict": as_dict,
            "million": message(shape=list(range(10**6))),
            "interrupt": interrupt,
            "recursion": message(shape=[Deep()]),
            "big int": message(version=10**5000),
            "tuple of one": message(shape=[(1,)]),
            "whitespace": message(shape=["a\\n\\n  b"]),
            "holds itself": message(shape=holds_itself),
            "long repr": message(shape=Long()),
            "multi-line repr": message(shape=[Lines()]),
        })
        """
    )
    assert out["list"] == "TypeError: shape: expected a tuple of non-negative ints, received [<shrink>] (list)"
    assert out["dict"] == "TypeError: shape: expected a tuple of non-negative ints, received {'a': <shrink>} (dict)"
    assert out["million"].endswith(", 19, 20, 21, 2... (list)") and len(out["million"]) < 200
    assert out["interrupt"] == "KeyboardInterrupt"
    assert out["recursion"].endswith("received [<repr() raised RecursionError>] (list)")
    assert out["big int"] == "ValueError: version: <an int of 16610 bits> (int) does not fit in 64 bits"
    assert out["tuple of one"].endswith("received [(1,)] (list)")
    assert out["whitespace"].endswith("received ['a\\n\\n  b'] (list)")  # a str's repr is kept as it is
    assert out["holds itself"].endswith("received [1, [...], {'me': [...]}] (list)")
    assert out["long repr"].endswith("received " + "x" * 80 + "... (10000000 characters) (Long)")
    assert out["multi-line repr"].endswith("received [a b] (list)")


def test_validate_names_sixteen_unknown_keys_and_counts_the_others():
    out = results(
        """
        base = {"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}
        many = dict(base, **{f"k{i}": i for i in range(10**6)})
        newer = dict(many, version=4)
        print({
            "validate": cai.validate(many),
            "newer": first(lambda: cai.from_cuda_array_interface(newer)),
            "one more": cai.validate(dict(base, **{f"k{i}": i for i in range(17)}))[-1],
        })
        """
    )
    assert len(out["validate"]) == 17
    assert out["validate"][0] == "__cuda_array_interface__: key 'k0' is not defined by any version of the interface"
    assert out["validate"][-1] == "__cuda_array_interface__: and 999984 more keys that no version of the interface defines"
    assert out["newer"].startswith("ValueError: version: 4 is newer") and out["newer"].endswith("'k15' and 999984 more")
    assert out["one more"] == "__cuda_array_interface__: and 1 more key that no version of the interface defines"


def test_long_names_and_exception_texts_are_quoted_by_their_start():
    out = results(
        """
        import collections.abc
        class N:
            def __repr__(self): return "N"
        N.__name__ = "x" * 10**6
        class E(Exception):
            def __str__(self): return "e" * 10**7
        class M(collections.abc.Mapping):
            def __getitem__(self, k): raise E()
            def __len__(self): return 1
            def __iter__(self): return iter(["shape"])
        base = {"version": 3, "shape": (4,), "typestr": "<f4", "data": (PTR, False)}
        print({
            "type name": cai.validate(dict(base, shape=N())),
            "exception": cai.validate(P(get=M)),
            "raising": first(lambda: cai.as_cuda_array(P(get=M))),
            "policy": first(lambda: cai.as_cuda_array(P(get=lambda: base), policy="x" * 10**6)),
        })
        """
    )
    assert len(out["type name"]) == 1 and len(out["type name"][0]) < 300 and "(1000000 characters)" in out["type name"][0]
    not_a_dict, exception = out["exception"]
    assert not_a_dict.startswith("__cuda_array_interface__: expected a dict, received <")
    assert len(exception) < 400 and "(10000000 characters)" in exception
    assert out["raising"].startswith("TypeError: __cuda_array_interface__: ") and len(out["raising"]) < 400
    assert out["policy"].startswith("ValueError: policy: 'xxx") and len(out["policy"]) < 300


# -- arithmetic ----------------------------------------------------------------------------------------


def test_element_counts_do_not_depend_on_dimension_order():
    out = results(
        """
        def attempt(shape, typestr="<f8"):
            try:
                v = cai.from_cuda_array_interface({"version": 3, "shape": shape, "typestr": typestr, "data": (0, False)})
                return ("ok", v.strides, v.nbytes, v.size, v.is_c_contiguous, v.is_f_contiguous)
            except ValueError as e:
                return ("ValueError", str(e).split(":")[0])
        print({str(s): attempt(s) for s in [(0, 2**63, 2), (2, 2**63, 0), (0, 2**62), (2**62, 0), (0, 2**40, 2), (2, 2**40, 0)]})
        """
    )
    for shape in ["(0, 9223372036854775808, 2)", "(2, 9223372036854775808, 0)", "(0, 4611686018427387904)", "(4611686018427387904, 0)"]:
        assert out[shape] == ("ValueError", "shape"), shape
    assert out["(0, 1099511627776, 2)"] == ("ok", (2**44, 16, 8), 0, 0, True, True)
    assert out["(2, 1099511627776, 0)"] == ("ok", (2**43, 8, 8), 0, 0, True, True)


def test_a_span_wider_than_isize_is_refused_whatever_the_signs_of_its_strides():
    # Each side of the span fits isize; the whole does not (the mirror image of a span
    # refused for its positive side). Accepted, the host extractor made an ndarray view of it.
    out = results(
        """
        import numpy as np
        mem = np.zeros(8, np.int64)
        at = mem.ctypes.data
        def host(shape, strides, data, typestr="<i8"):
            class H:
                __array_interface__ = {"version": 3, "shape": shape, "typestr": typestr, "data": (data, False), "strides": strides}
            return H()
        print({
            "positive": first(lambda: cai.as_array(host((2,), (2**63 - 8,), at))),
            "negative": first(lambda: cai.as_array(host((2,), (-(2**63 - 8),), 2**63 + at))),
            "both signs": first(lambda: cai.as_array(host((2, 2), (-2**62, 2**62), 2**62 + at))),
            "extractor": first(lambda: fx.host_nd_elements(host((2, 2), (-2**62, -2**62), 2**63 + at))),
        })
        """
    )
    for case, message in out.items():
        assert message is not None and message.startswith("ValueError: strides:"), (case, message)
        assert "the byte extent exceeds isize" in message, (case, message)


def test_a_typestr_with_a_lone_surrogate_is_a_value_error():
    out = run(
        """
        try:
            cai.from_cuda_array_interface({"version": 3, "shape": (1,), "typestr": "<f\\ud800", "data": (PTR, False)})
        except ValueError as e:
            print("ValueError", str(e)[:9])
        """
    )
    assert out.split() == ["ValueError", "typestr:"]


def test_a_lone_surrogate_is_shown_as_python_shows_it():
    out = results(
        """
        out = {"message": first(lambda: cai.from_cuda_array_interface(
            {"version": 3, "shape": (1,), "typestr": "<f\\udc80", "data": (PTR, False)}))}
        print(out)
        """
    )
    assert out["message"] == (
        "ValueError: typestr: '<f\\udc80' is malformed: it is not valid Unicode text (a lone surrogate)"
    )


def test_a_module_posing_as_numpy_can_interrupt_the_scalar_check_but_not_fool_it():
    # A writing host argument asks whether it was given a NumPy scalar (whose interface
    # describes a copy), through sys.modules["numpy"].generic, once NumPy is imported.
    out = results(
        """
        import ctypes, struct, types
        before = "numpy" in sys.modules
        buf = ctypes.create_string_buffer(8)
        d = {"shape": (1,), "typestr": "<f8", "data": (ctypes.addressof(buf), False), "version": 3}
        class Interrupting(types.ModuleType):
            @property
            def generic(self):
                raise KeyboardInterrupt
        sys.modules["numpy"] = Interrupting("numpy")
        interrupted = kind(lambda: fx.host_hold(P(host=True), lambda: None))
        class generic:
            pass
        posing = types.ModuleType("numpy")
        posing.generic = generic
        sys.modules["numpy"] = posing
        Sub = type("Sub", (generic,), {"__array_interface__": property(lambda s: d)})
        print({"numpy before": before, "interrupted": interrupted, "a class named generic": kind(lambda: fx.host_hold(Sub(), lambda: None)),
               "written": struct.unpack("<d", buf.raw)[0]})
        """
    )
    assert out == {"numpy before": False, "interrupted": "KeyboardInterrupt", "a class named generic": "ok", "written": 1.0}


# -- the extractors' overlap check is per call -------------------------------------------------------


def test_overlap_is_a_property_of_one_call_not_of_the_process():
    out = results(
        """
        def dev(ptr, n=16, readonly=False):
            return P(get=lambda: {"version": 3, "shape": (n,), "typestr": "<f4", "data": (ptr, readonly)})
        entered, release = threading.Event(), threading.Event()
        def slow():
            entered.set()
            release.wait(10)
            return {"version": 3, "shape": (16,), "typestr": "<f4", "data": (PTR + 4096, False)}
        result = {}
        # Thread A is inside add_into(out, a): `out` is held for writing while `a` is read.
        t = threading.Thread(target=lambda: result.__setitem__("A", outcome(lambda: fx.add_into(dev(PTR), P(get=slow)))))
        t.start()
        entered.wait(10)
        # Another thread's call on the same memory is another call.
        result["B"] = outcome(lambda: fx.add_into(dev(PTR), dev(PTR + 1024)))
        release.set(); t.join()
        # Re-entry: the second argument's property calls add_into on the first's memory.
        def reenter():
            result["inner"] = outcome(lambda: fx.add_into(dev(PTR), dev(PTR + 1024)))
            return {"version": 3, "shape": (16,), "typestr": "<f4", "data": (PTR + 4096, False)}
        result["outer"] = outcome(lambda: fx.add_into(dev(PTR), P(get=reenter)))
        # Within one call, overlap is still refused.
        result["same call"] = outcome(lambda: fx.add_into(dev(PTR), dev(PTR + 32)))
        print(result)
        """
    )
    assert out == {"A": "ok", "B": "ok", "inner": "ok", "outer": "ok", "same call": "BufferError"}


def test_an_argument_whose_last_reference_goes_with_it_may_extract_again_from_del():
    # A DLPack producer's tensor lives only in the argument: its `__del__` runs while the
    # argument is dropped, inside the call, and extracts again on the same thread (which
    # reuses the box the argument has just given back, and must find the registry
    # consistent). Then the same with the last reference in the caller's arguments, whose
    # `__del__` runs as the call returns.
    out = results(
        """
        import numpy as np
        seen, inside = [], [False]
        x, y = np.zeros(16, np.float32), np.zeros(16, np.float32)
        def again(*tag):
            seen.append((*tag, outcome(lambda: fx.host_add_into(x, y)), outcome(lambda: fx.host_add_into(x, x))))
        class Dying(np.ndarray):
            def __del__(self):
                # Nothing but the argument holds this array: `inside` shows that it went
                # before the call returned.
                again("dlpack", inside[0])
        class Fresh:
            def __dlpack_device__(self):
                return (1, 0)
            def __dlpack__(self, **kw):
                return np.arange(16, dtype=np.float32).view(Dying).__dlpack__(**kw)
        def call(f):
            inside[0] = True
            try:
                return f()
            finally:
                inside[0] = False
        result = {}
        result["call"] = outcome(lambda: call(lambda: tuple(fx.host_shape_f32(Fresh()))))
        # A later argument fails: the first, already extracted, goes then.
        result["failed call"] = outcome(lambda: call(lambda: fx.host_add_into(Fresh(), P(host=True, get=lambda: {}))))
        def dev(ptr, n=16):
            return {"version": 3, "shape": (n,), "typestr": "<f4", "data": (ptr, False)}
        class DyingProducer(P):
            def __del__(self):
                again("producer")
        for _ in range(200):
            fx.add_into(DyingProducer(get=lambda: dev(PTR)), P(get=lambda: dev(PTR + 1024)))
            call(lambda: fx.host_shape_f32(Fresh()))
        result["inner"] = sorted(set(seen))
        result["after"] = (outcome(lambda: fx.host_add_into(x, y)), outcome(lambda: fx.host_add_into(x, x)))
        print(result)
        """
    )
    assert out == {
        "call": "ok",
        "failed call": "TypeError",
        "inner": [("dlpack", True, "ok", "BufferError"), ("producer", "ok", "BufferError")],
        "after": ("ok", "BufferError"),
    }, out


@pytest.mark.parametrize("where", ["__dlpack_device__", "__dlpack__"])
def test_dlpack_producers_that_raise_or_lie_reach_the_extractors_cleanly(where):
    out = results(
        f"""
        import numpy as np
        backing = np.arange(6, dtype=np.float32)

        class Lying:
            def __init__(self, exc): self.exc = exc
            def __dlpack_device__(self):
                if "{where}" == "__dlpack_device__": raise self.exc
                return (1, 0)
            def __dlpack__(self, **kw):
                if "{where}" == "__dlpack__": raise self.exc
                return backing.__dlpack__(**kw)

        out = {{}}
        for exc in (ValueError("no"), KeyboardInterrupt()):
            for name, call in [("host", lambda: fx.host_shape_f32(Lying(exc))), ("device", lambda: fx.describe_f32(Lying(exc)))]:
                try:
                    call()
                    out[name + type(exc).__name__] = "ok"
                except BaseException as e:
                    out[name + type(exc).__name__] = type(e).__name__
        # a producer that returns something other than a capsule
        class NotACapsule:
            def __dlpack_device__(self): return (1, 0)
            def __dlpack__(self, **kw): return object()
        try:
            fx.host_shape_f32(NotACapsule())
        except TypeError as e:
            out["not a capsule"] = "TypeError" if "expected a PyCapsule" in str(e) else str(e)
        print(out)
        """
    )
    # The device extractor never asks a host producer for its tensor: it refuses it by its device.
    assert out["hostValueError"] == "ValueError" and out["hostKeyboardInterrupt"] == "KeyboardInterrupt"
    if where == "__dlpack__":
        assert out["deviceValueError"] == "TypeError" and out["deviceKeyboardInterrupt"] == "TypeError", out
    else:
        assert out["deviceValueError"] == "ValueError" and out["deviceKeyboardInterrupt"] == "KeyboardInterrupt"
    assert out["not a capsule"] == "TypeError"


# -- interrupts from the objects around an import: stream objects, producers' retries, reprs ----


def test_an_interrupt_in_a_stream_object_or_an_option_propagates_unchanged():
    out = results(
        """
        class Interrupting:
            def __index__(self): raise KeyboardInterrupt
        class Exiting:
            def __index__(self): raise SystemExit(3)
        class LoudInt(int):
            def __repr__(self): raise KeyboardInterrupt
        D = fx.DeviceMatrix(PTR, 12, [3, 4])
        good = {"shape": (3, 4), "typestr": "<f4", "data": (PTR, False), "version": 3}

        out = {}
        for name, bad in [("index", Interrupting()), ("exit", Exiting())]:
            out["as_cuda_array " + name] = kind(lambda: cai.as_cuda_array(P(lambda: good), stream=bad))
            out["from_dlpack " + name] = kind(lambda: cai.from_dlpack(D, stream=bad))
            out["configure " + name] = kind(lambda: cai.configure(export_version=bad))
        out["export stream repr"] = kind(lambda: cai.from_dlpack(D).__dlpack__(stream=LoudInt(2**70)))

        class OldProducer:
            '''Refuses max_version with a TypeError; its retry is interrupted.'''
            def __dlpack_device__(self): return (1, 0)
            def __dlpack__(self, **kw):
                if "max_version" in kw: raise TypeError("old")
                raise KeyboardInterrupt
        out["retry"] = kind(lambda: cai.from_dlpack(OldProducer()))
        out["retry extractor"] = kind(lambda: fx.host_shape_f32(OldProducer()))
        print(out)
        """
    )
    expected = {k: ("SystemExit" if k.endswith("exit") else "KeyboardInterrupt") for k in out}
    assert out == expected


def test_a_keyboard_interrupt_from_a_signal_handler_is_never_dropped():
    # A timer's handler raises KeyboardInterrupt wherever the interpreter checks for
    # signals, cai's calls included (formatting a type name through str() did, and pyo3
    # reported the interrupt as unraisable and dropped it). Every interrupt must reach the
    # loop; none may end as an unraisable one.
    out = results(
        """
        import signal, time
        import numpy as np
        lost, caught, armed = [], [0], [False]
        sys.unraisablehook = lambda u: lost.append(type(u.exc_value).__name__)
        def interrupt(sig, frame):
            if armed[0]:
                armed[0] = False
                raise KeyboardInterrupt
        signal.signal(signal.SIGALRM, interrupt)
        x = np.arange(4.0)
        view = cai.as_array(x)
        calls = [lambda: cai.from_dlpack(x), lambda: cai.from_dlpack(view), lambda: fx.host_shape_f32(x.astype(np.float32)),
                 lambda: cai.as_array(x), lambda: cai.validate(x)]
        signal.setitimer(signal.ITIMER_REAL, 1e-5, 1e-5)
        end = time.time() + 1.5
        while time.time() < end:
            for call in calls:
                try:
                    armed[0] = True
                    call()
                    armed[0] = False
                except KeyboardInterrupt:
                    caught[0] += 1
        signal.setitimer(signal.ITIMER_REAL, 0)
        print({"lost": len(lost), "caught some": caught[0] > 10})
        """
    )
    assert out == {"lost": 0, "caught some": True}


def test_importing_cai_in_a_subinterpreter_is_an_import_error():
    # cai keeps Python objects in process-wide statics, which interpreters must not share.
    out = results(
        """
        try:
            import _interpreters as sub
        except ImportError:
            import _xxsubinterpreters as sub
        import numpy, re
        out = {}
        for name in ("cai", "cai_fixtures"):
            interp = sub.create()
            # CPython 3.12 raises the failure wrapped (RunFailedError), 3.13 returns it, and
            # both word it "does not support loading in subinterpreters".
            try:
                failure = sub.run_string(interp, f"import {name}")
            except Exception as e:
                failure = e
            refused = re.search(r"ImportError.*does not support (loading in )?subinterpreters", str(failure))
            out[name] = "imported" if failure is None else "ImportError" if refused else repr(failure)
            sub.destroy(interp)
        out["main"] = repr(cai.as_array(numpy.zeros(2)))[:13]
        print(out)
        """
    )
    assert out == {"cai": "ImportError", "cai_fixtures": "ImportError", "main": "cai.HostArray"}


def test_views_and_tensors_refuse_every_pickle_protocol_and_copy():
    out = results(
        """
        import copy, pickle
        import numpy as np
        view = cai.as_array(np.arange(3.0))
        tensor = view.owner if type(view.owner).__name__ == "DLPackTensor" else cai.from_dlpack(np.arange(3.0)).owner
        out = {}
        for label, obj in [("view", view), ("tensor", tensor)]:
            for how in [*(f"protocol {p}" for p in range(pickle.HIGHEST_PROTOCOL + 1)), "copy", "deepcopy"]:
                try:
                    if how.startswith("protocol"):
                        pickle.dumps(obj, int(how.split()[1]))
                    else:
                        getattr(copy, how)(obj)
                    out[label, how] = "done"
                except TypeError as e:
                    out[label, how] = str(e).split(":")[0]
        print(sorted({f"{how.split()[0]}: {message}" for (_, how), message in out.items()}))
        """
    )
    assert out == [
        "copy: cannot copy 'cai.DLPackTensor' object",
        "copy: cannot copy 'cai.HostArray' object",
        "deepcopy: cannot copy 'cai.DLPackTensor' object",
        "deepcopy: cannot copy 'cai.HostArray' object",
        "protocol: cannot pickle 'cai.DLPackTensor' object",
        "protocol: cannot pickle 'cai.HostArray' object",
    ]


# -- a view's interface dict, read late or looked for -------------------------------------------------


def test_views_read_from_a_del_at_shutdown_export_their_dicts():
    # Every read path (a plain view's first and later reads, and a record view's dict,
    # built on each read) from objects freed while the interpreter shuts down: no read
    # may need what shutdown takes away (pyo3's checks of the interpreter's state).
    out = run(
        """
        import numpy as np
        class Late:
            def __init__(self, label, view, reads):
                self.label, self.view, self.reads = label, view, reads
            def __del__(self):
                shapes = [getattr(self.view, self.attr)["shape"] for _ in range(self.reads)]
                print(self.label, shapes, flush=True)
        def dev(desc):
            return cai.as_cuda_array(P(get=lambda: desc), sync=False)
        record = {"shape": (4,), "typestr": "|V8", "descr": [("a", "<f4"), ("b", "<i4")], "data": (PTR, True), "version": 3}
        late = []
        for label, view, reads in [
            ("host first", cai.as_array(np.zeros(3)), 2),
            ("device first", dev({"shape": (5,), "typestr": "<f4", "data": (PTR, False), "version": 3}), 2),
            ("record", dev(record), 2),
        ]:
            late.append(Late(label, view, reads))
            late[-1].attr = "__array_interface__" if label.startswith("host") else "__cuda_array_interface__"
        # No view is read before: the first read of all comes at shutdown.
        """
    )
    assert sorted(out.splitlines()) == ["device first [(5,), (5,)]", "host first [(3,), (3,)]", "record [(4,), (4,)]"], out


def test_the_dict_a_view_copies_is_out_of_the_collectors_reach():
    # gc.get_objects() lists what the collector tracks: the view's own dict must not be
    # among them, or code could change what every later read (and numpy) trusts.
    out = results(
        """
        import numpy as np
        base = np.arange(3.0)
        views = [cai.as_array(base), cai.as_cuda_array(P(get=lambda: {"shape": (3,), "typestr": "<f8", "data": (PTR, False), "version": 3}), sync=False)]
        for v in views:
            v.__array_interface__ if isinstance(v, cai.HostArray) else v.__cuda_array_interface__
        found = 0
        for o in gc.get_objects():
            if type(o) is dict and o.get("shape") == (3,) and o.get("typestr") == "<f8" and "version" in o:
                found += 1
                o["shape"] = (1_000_000,)
        after = [views[0].__array_interface__["shape"], views[1].__cuda_array_interface__["shape"], np.asarray(views[0]).shape]
        print({"after": after})
        """
    )
    assert out == {"after": [(3,), (3,), (3,)]}


def test_no_dict_an_export_or_import_reuses_is_in_the_collectors_reach():
    # Every export of an equal descriptor copies one dict made for it, and the host
    # extractor passes NumPy one set of keywords on every call: code that found either
    # through the collector could make new, validated views export a shape of its own
    # (and numpy read past the memory), or ask NumPy for a copy that writes never reach.
    out = results(
        """
        import numpy as np
        base = np.arange(3.0)
        cai.as_array(base).__array_interface__
        m = np.ones((2, 2), np.float32)
        fx.host_scale(m, 2.0)
        hit = 0
        for o in gc.get_objects():
            if type(o) is dict and o.get("shape") == (3,) and "version" in o:
                o["shape"] = (100_000_000,); hit += 1
            if type(o) is dict and "max_version" in o and len(o) == 1:
                o["copy"] = True; hit += 1
        for o in gc.get_referrers((3,), "<f8"):
            if type(o) is dict:
                o["shape"] = (100_000_000,); hit += 1
        fresh = cai.as_array(base)
        fx.host_scale(m, 2.0)
        print({"hit": hit, "export": fresh.__array_interface__["shape"], "numpy": np.asarray(fresh).shape,
               "written": m.tolist()})
        """
    )
    assert out == {"hit": 0, "export": (3,), "numpy": (3,), "written": [[4.0, 4.0], [4.0, 4.0]]}


def test_a_finalizer_that_reads_a_view_during_its_first_export_gets_the_dict():
    # On 3.11 any allocation may start a collection; the first export of a view allocates,
    # and a finalizer run then may read the same view (and start cai's one-time lookups).
    # Nothing may wait for itself: each read returns the view's dict.
    out = results(
        """
        import numpy as np
        seen = []
        class Cycle:
            def __del__(self):
                seen.append(v.__array_interface__["shape"])
                seen.append(w.__cuda_array_interface__["shape"])
        first = []
        for n in range(3, 8):
            v = cai.as_array(np.arange(float(n)))
            w = cai.as_cuda_array(P(get=lambda: {"shape": (n,), "typestr": "<f4", "data": (PTR, False), "version": 3}))
            gc.disable()
            c = Cycle(); c.self = c; del c
            # CPython's free lists emptied, so that the export's dicts and tuples are new
            # objects, each of which counts towards a collection.
            spare = [{} for i in range(200)] + [(i,) for i in range(3000)] + [(i, i) for i in range(3000)]
            gc.set_threshold(1); gc.enable()
            first.append((v.__array_interface__["shape"], w.__cuda_array_interface__["shape"]))
            gc.set_threshold(700); gc.collect()
        print({"first": first, "inner": seen})
        """
    )
    shapes = [((n,), (n,)) for n in range(3, 8)]
    assert out["first"] == shapes and out["inner"] == [s for pair in shapes for s in pair], out


HOOKED = textwrap.dedent(
    """
    import builtins
    real_import = builtins.__import__
    def hooked(names, action):
        '''Runs `action` in the import of any module whose name starts with one of `names`,
        once at a time (the action's own imports are not hooked).'''
        busy = []
        def hook(name, *args, **kwargs):
            if name.startswith(names) and not busy:
                busy.append(1)
                try:
                    action()
                finally:
                    busy.pop()
            return real_import(name, *args, **kwargs)
        builtins.__import__ = hook
    def interrupt():
        raise KeyboardInterrupt("from an import hook")
    """
)


# `cai.pointer_attributes` raises `cai.CudaDriverError` where no driver can be loaded, the
# one call that looks the class up: with a driver, it asks the driver instead.
DRIVER_ERROR = pytest.mark.skipif(
    cai.cuda_driver_present(), reason="needs a machine without a CUDA driver (the driver-error class lookup)"
)


@pytest.mark.parametrize(
    "call",
    [
        "cai.configure()",
        "cai.as_cuda_array(P(), sync=False)",
        pytest.param("cai.pointer_attributes(4096)", marks=DRIVER_ERROR),
        "fx.describe_f32(P())",
    ],
)
def test_an_interrupt_in_an_import_cai_makes_on_first_use_propagates(call):
    # The options cai shares with other modules and the class of its driver errors are
    # looked up through an import, once: a KeyboardInterrupt there (an import hook, a
    # signal) reaches the caller, and the next call looks again.
    out = results(
        HOOKED
        + textwrap.dedent(
            f"""
        d = {{"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3}}
        hooked(("cai",), interrupt)
        try:
            {call}
            first = "returned"
        except BaseException as e:
            first = type(e).__name__
        builtins.__import__ = real_import
        print({{"first": first, "again": outcome(lambda: {call})}})
        """
        )
    )
    again = "CudaDriverError" if "pointer_attributes" in call else "ok"
    assert out == {"first": "KeyboardInterrupt", "again": again}


def test_a_first_look_at_the_package_that_fails_for_now_is_not_kept():
    # An ordinary exception from the import (an import hook's) is not the package's
    # absence: the module uses its own options and classes for that call, and the next
    # call finds the package's.
    out = results(
        HOOKED
        + textwrap.dedent(
            """
        import numpy as np
        def transient():
            raise ValueError("not now")
        hooked(("cai",), transient)
        d = {"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3, "stream": 7}
        first = [outcome(lambda: fx.describe_f32(P())), isinstance(fx.rust_as_array(np.zeros(3)), cai.HostArray)]
        builtins.__import__ = real_import
        cai.configure(import_sync="wait")
        try:
            fx.describe_f32(P())
            then = "returned"
        except Exception as e:
            then = [type(e).__name__, isinstance(e, cai.CudaDriverError)]
        print({"first": first, "then": then, "view": isinstance(fx.rust_as_array(np.zeros(3)), cai.HostArray)})
        """
        )
    )
    assert out == {"first": ["ok", False], "then": ["CudaDriverError", True], "view": True}


@pytest.mark.parametrize(
    "names,inner,outer,expected",
    [
        (("cai",), "cai.configure()", "cai.configure()", "ok"),
        pytest.param(
            ("cai",), "cai.pointer_attributes(4096)", "cai.pointer_attributes(4096)", "CudaDriverError", marks=DRIVER_ERROR
        ),
        (("collections",), "cai.validate(P(get=lambda: [1, 2]))", "cai.validate(P(get=lambda: [1, 2]))", "findings:1"),
        (("cai",), "fx.describe_f32(P())", "fx.describe_f32(P())", "ok"),
    ],
)
def test_a_one_time_lookup_reentered_from_its_own_import_finishes(names, inner, outer, expected):
    # The import a one-time lookup makes runs a hook that calls cai again, which needs the
    # same lookup: each call finishes (none waits for itself), with the same answer.
    out = results(
        HOOKED
        + textwrap.dedent(
            f"""
        d = {{"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3}}
        inner = []
        hooked({names!r}, lambda: inner.append(outcome(lambda: {inner})))
        result = outcome(lambda: {outer})
        builtins.__import__ = real_import
        print({{"inner": inner[:1], "outer": result, "again": outcome(lambda: {outer})}})
        """
        )
    )
    assert out == {"inner": [expected], "outer": expected, "again": expected}


# The error of a recursion that cai's nesting limit ends (whichever level reaches the
# limit first names itself).
NESTING_LIMIT = r"RecursionError: maximum recursion depth exceeded while reading .* \(64 nested reads\)"


@pytest.mark.parametrize(
    "call,warm",
    [
        ("cai.configure()", None),
        ("fx.describe_f32(P())", None),
        ("fx.rust_as_array(np.zeros(3))", None),
        ("fx.rust_as_array(np.zeros(3))", "fx.describe_f32(P())"),
    ],
)
def test_a_one_time_lookup_whose_import_always_calls_cai_again_finishes(call, warm):
    # An import hook that calls cai on every `import cai`: the call it makes during the
    # lookup does not look again (it uses the module's own values, this time), so the
    # lookup finishes. (Each level of the recursion once made every lookup again: the
    # work doubled with each level.) Warmed, the options are kept and only the view
    # factory is looked up.
    out = run(
        f"""
        import builtins
        import numpy as np
        d = {{"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3}}
        {warm or "pass"}
        real_import = builtins.__import__
        def hook(name, *args, **kwargs):
            if name == "cai":
                {call}
            return real_import(name, *args, **kwargs)
        builtins.__import__ = hook
        print(deep(lambda: {call}))
        """
    )
    assert out == "None\n", out


def test_lookups_that_fail_and_call_cai_again_do_not_multiply():
    # An import hook that calls cai and then refuses the import: each failed lookup's call
    # made from the hook uses the module's own values at once, and the failures are
    # bounded, so the hook runs a few times, not once per node of a tree 64 levels deep.
    out = results(
        """
        import builtins
        real_import = builtins.__import__
        d = {"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3}
        calls = [0]
        def hook(name, *args, **kwargs):
            if name == "cai":
                calls[0] += 1
                outcome(lambda: fx.rust_as_cuda_array(P()))
                raise ImportError("not now")
            return real_import(name, *args, **kwargs)
        builtins.__import__ = hook
        first = [outcome(lambda: fx.rust_as_cuda_array(P())) for _ in range(10)]
        print({"first": first, "hook calls": calls[0]})
        """
    )
    assert out["first"] == ["ok"] * 10 and out["hook calls"] <= 8, out


def test_a_package_that_never_imports_is_tried_a_logarithmic_number_of_times(tmp_path):
    # A broken install (its __init__ raises ImportError): after failures in a row, each
    # value is looked up at ever longer intervals, not on every call.
    (tmp_path / "cai").mkdir()
    (tmp_path / "cai" / "__init__.py").write_text(
        "import builtins\nbuiltins.RUNS = getattr(builtins, 'RUNS', 0) + 1\nraise ImportError('a broken build')\n"
    )
    out = results(
        f"""
        import builtins, numpy as np
        del sys.modules["cai"]
        for name in [m for m in sys.modules if m.startswith("cai.")]:
            del sys.modules[name]
        sys.path.insert(0, {str(tmp_path)!r})
        d = {{"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3}}
        for _ in range(1000):
            fx.describe_f32(P()); fx.rust_as_array(np.zeros(3))
        print({{"runs": builtins.RUNS}})
        """
    )
    # Two values (the options and the view factory), each looked up about log2(1000) + 1
    # times.
    assert 2 <= out["runs"] <= 2 * 11, out


# `import cai` refused on every thread (after a delay) until `accept()`, which also makes
# the shared options wait on streams: a call that uses them raises CudaDriverError for
# `d`'s stream; a call on a module's own options (CAI_IMPORT_SYNC=ignore) does not.
REFUSING = textwrap.dedent(
    """
    import builtins, time
    real_import = builtins.__import__
    d = {"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3, "stream": 7}
    refusing = []
    def refuse(delay=0.0):
        refusing.append(delay)
    def accept():
        refusing.clear()
        cai.configure(import_sync="wait")
    def hook(name, *args, **kwargs):
        if name == "cai" and refusing:
            time.sleep(refusing[0])
            raise ImportError("not now")
        return real_import(name, *args, **kwargs)
    builtins.__import__ = hook
    """
)


def test_one_refusal_met_by_many_threads_at_once_counts_once():
    # Lookups that overlap (the hook sleeps, letting the other threads in) and fail
    # together are one failure: the next call looks again and finds the package.
    out = results(
        REFUSING
        + textwrap.dedent(
            """
        refuse(delay=0.2)
        barrier = threading.Barrier(12)
        def first_call():
            barrier.wait()
            fx.describe_f32(P())
        threads = [threading.Thread(target=first_call) for _ in range(12)]
        for t in threads: t.start()
        for t in threads: t.join()
        accept()
        print({"then": outcome(lambda: fx.describe_f32(P()))})
        """
        )
    )
    assert out == {"then": "CudaDriverError"}, out


def test_a_passing_failure_of_the_package_is_recovered_from():
    # The package's import is refused for a while (by calls on several threads too): the
    # failures in a row make the lookups wait longer, but once the refusal ends a later
    # call finds the package and its shared options; nothing is lost for good.
    out = results(
        REFUSING
        + textwrap.dedent(
            """
        refuse()
        threads = [threading.Thread(target=lambda: [fx.describe_f32(P()) for _ in range(5)]) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        accept()
        seen = [outcome(lambda: fx.describe_f32(P())) for _ in range(100)]
        print({"found": "CudaDriverError" in seen, "then": seen[-1]})
        """
        )
    )
    assert out == {"found": True, "then": "CudaDriverError"}, out


def test_a_module_that_an_import_hook_misses_is_not_the_package_missing():
    # A ModuleNotFoundError for another module (the hook's own dependency) is not the
    # package's absence: the next call finds the package and its shared options.
    out = results(
        """
        import builtins
        real_import = builtins.__import__
        d = {"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3, "stream": 7}
        def hook(name, *args, **kwargs):
            if name == "cai":
                import a_plugin_that_is_not_installed
            return real_import(name, *args, **kwargs)
        builtins.__import__ = hook
        first = outcome(lambda: fx.describe_f32(P()))
        builtins.__import__ = real_import
        cai.configure(import_sync="wait")
        print({"first": first, "then": outcome(lambda: fx.describe_f32(P()))})
        """
    )
    assert out == {"first": "ok", "then": "CudaDriverError"}, out


def test_a_view_factory_put_in_the_package_s_place_that_makes_views_again_ends_in_recursion_error():
    # Python code may replace the `cai` package before a module's first view: a factory
    # that makes a view again nests as a read does.
    out = run(
        """
        import types
        import numpy as np
        fake = types.ModuleType("cai")
        fake._cai = types.SimpleNamespace(_make_view_v3=lambda *args: fx.rust_as_array(np.zeros(2)))
        sys.modules["cai"] = fake
        print(deep(lambda: fx.rust_as_array(np.zeros(3))))
        """
    )
    assert re.fullmatch(NESTING_LIMIT + r"\n", out), out


@DRIVER_ERROR
def test_a_driver_error_class_that_calls_cai_again_as_it_is_made_ends_in_recursion_error():
    # The class every module raises is whatever `cai._cai.CudaDriverError` holds: one
    # whose constructor calls cai again is made where cai counts the nesting (made by
    # CPython as it raised the error, the recursion was a fatal error).
    out = run(
        """
        d = {"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3, "stream": 5}
        own = cai.CudaDriverError
        class E(cai.CudaDriverError):
            def __init__(self, *args):
                fx.describe_f32(P())
        cai._cai.CudaDriverError = E
        cai.configure(import_sync="sync")
        print(deep(lambda: cai.pointer_attributes(4096)))
        print(deep(lambda: fx.describe_f32(P())))
        """
    )
    for line in out.splitlines():
        assert re.fullmatch(NESTING_LIMIT, line), out


def test_a_module_that_calls_in_while_cai_is_being_imported_still_shares_its_options():
    # A module built on cai-py looks the package's options up at its first use, importing
    # `cai._cai`. A finalizer that runs while that module is being executed (before it has
    # published its options) calls the module again: that call makes do with the module's
    # own options, but the choice is not kept, so `cai.configure` governs it afterwards.
    # No prelude: `cai` must not be imported before the module's first use.
    out = results(
        """
        import gc, sys
        import cai_fixtures as fx
        PTR = 0x7F0000000000
        inner = []
        class Cycle:
            def __del__(self):
                m = sys.modules.get("cai._cai")
                if m is not None and not hasattr(m, "_config_v1") and not inner:
                    try:
                        fx.DeviceMatrix(PTR, 12, [3, 4]).__cuda_array_interface__
                        inner.append("ok")
                    except BaseException as e:
                        inner.append(repr(e))
                elif not inner:
                    c = Cycle(); c.self = c  # garbage for the next collection
        gc.disable()
        c = Cycle(); c.self = c; del c
        gc.set_threshold(1); gc.enable()
        fx.DeviceMatrix(PTR, 12, [3, 4]).__cuda_array_interface__
        gc.set_threshold(700)
        import cai
        cai.configure(export_version=2)
        exported = fx.DeviceMatrix(PTR, 15, [3, 5]).__cuda_array_interface__
        print({"inner": inner, "version": exported["version"]})
        """,
        prelude="",
    )
    if sys.version_info >= (3, 12) and out["inner"] == []:
        # No collection ran while `cai._cai` was executed: from CPython 3.12 collections run
        # between bytecodes, and the window is reached on some versions (3.13) only.
        assert out == {"inner": [], "version": 2}
    else:
        assert out == {"inner": ["ok"], "version": 2}


def test_a_first_export_on_one_thread_never_fails_an_import_of_cai_on_another():
    # A module's first export looks the `cai` package up. Imported as `cai._cai`, the
    # lookup took the submodule's import lock before the package's, the reverse of an
    # `import cai` on another thread; importlib broke that cycle by failing one of the two
    # imports (`_DeadlockError`, in about one run of four).
    code = textwrap.dedent(
        """
        import sys, threading
        sys.setswitchinterval(1e-6)
        import cai_fixtures as fx
        assert "cai" not in sys.modules
        m = fx.DeviceMatrix(0x7F0000000000, 4, [4])
        barrier, out = threading.Barrier(2), []
        def export():
            barrier.wait()
            try:
                out.append(("export", m.__cuda_array_interface__["shape"]))
            except BaseException as e:
                out.append(("export", repr(e)))
        def importer():
            barrier.wait()
            try:
                import cai
                out.append(("import", cai.__name__))
            except BaseException as e:
                out.append(("import", repr(e)))
        threads = [threading.Thread(target=export), threading.Thread(target=importer)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(sorted(out))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    env.update(CAI_CHECK_POINTERS="0", PYTHONFAULTHANDLER="1")
    runs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(16)
    ]
    for r in runs:
        output = r.communicate(timeout=120)[0]
        assert r.returncode == 0 and output.strip() == "[('export', (4,)), ('import', 'cai')]", output[-4000:]


def test_a_dict_being_filled_cannot_be_changed_by_a_finalizer():
    # A collection started by an allocation while cai fills an export's dict runs
    # finalizers, which may find the unfinished dict (or a record's descr list) through
    # gc.get_objects() and change it: a shape of their own then went out as the array's,
    # kept for every later export of the descriptor, and NumPy read past the memory. The
    # finalizer here changes every such dict and list except the exports already returned,
    # and counts the unfinished dicts it finds (none: cai holds collections off meanwhile).
    out = results(
        """
        import numpy as np
        changed, partial, spare, armed, returned, keep = [0], [0], [], [False], set(), []
        class Cycle:
            def __del__(self):
                if armed[0]:
                    for o in gc.get_objects():
                        if id(o) in returned:
                            continue
                        # (A class's own dict has a `shape` too: its getter.)
                        if type(o) is dict and type(o.get("shape")) is tuple and "typestr" in o:
                            partial[0] += "version" not in o
                            o["shape"] = (100_000_000,); changed[0] += 1
                        elif type(o) is list and o and all(type(e) is tuple and len(e) == 2 and type(e[0]) is str for e in o):
                            o.append(("x", "<V1000000")); changed[0] += 1
                    # CPython's free lists emptied: the export's next tuple starts a collection.
                    spare.append([(i, -i) for i in range(2100)] + [(i,) for i in range(2100)] + [{} for _ in range(100)])
                c = Cycle(); c.self = c
        bases = [np.arange(float(n)) for n in range(3, 20)]
        record = np.zeros(3, dtype=[("a", "<f4"), ("b", "<i8")])
        views = [cai.as_array(b) for b in bases] + [cai.as_array(record)]
        views += [cai.as_cuda_array(P(get=lambda n=n: {"shape": (n,), "typestr": "<f4", "data": (PTR + 4096 * n, False), "version": 3}))
                  for n in range(3, 20)]
        views.append(cai.as_cuda_array(fx.MaskedDevice(PTR, PTR + 4096, 3)))
        matrices = [fx.BenchMatrix(PTR + 4096 * n, n, 2) for n in range(3, 12)]
        attr = lambda o: "__array_interface__" if isinstance(o, cai.HostArray) else "__cuda_array_interface__"
        want = [(v.shape, v.typestr, tuple(v.descr) if v.kind == "V" else None) for v in views] + [((n, 2), "<f4", None) for n in range(3, 12)]
        def exports():
            out = []
            for o in views + matrices:
                d = getattr(o, attr(o))
                # Nothing that can start a collection until the export is marked as returned.
                returned.add(id(d)); keep.append(d)
                r = d.get("descr")
                returned.add(id(r)); keep.append(r)
                out.append((d["shape"], d["typestr"], r and tuple(r)))
            return out
        armed[0] = True
        c = Cycle(); c.self = c; del c
        gc.set_threshold(1)
        first = exports()
        armed[0] = False
        gc.set_threshold(700)
        again = exports()
        fresh = [cai.as_array(b).__array_interface__["shape"] for b in bases]
        print({"changed": changed[0] > 0, "partial": partial[0], "first": first == want, "again": again == want, "fresh": fresh == [b.shape for b in bases],
               "descr": views[len(bases)].__array_interface__["descr"], "numpy": [np.asarray(v).shape for v in views[len(bases) - 2:len(bases) + 1]]})
        """
    )
    assert out == {
        "changed": True,
        "partial": 0,
        "first": True,
        "again": True,
        "fresh": True,
        "descr": [("a", "<f4"), ("b", "<i8")],
        "numpy": [(18,), (19,), (3,)],
    }


def test_the_dict_a_module_hands_the_package_factory_cannot_be_changed_by_a_finalizer():
    # A module built on cai-py (the fixtures) makes its views through the cai package's
    # factory, handing it an interface dict. A collection that an allocation starts before
    # the factory has read the dict (the arguments' tuple's, say) runs finalizers, which
    # found the dict through gc.get_objects() and changed it: the factory then made a view
    # of memory that is not there, and NumPy read past it; or changed its descr list (or a
    # nested record's list, through the tracked tuple holding it) to make the fields Python
    # objects over the raw bytes, which NumPy dereferences. The views' `descr` getter filled
    # its list as openly. Each collection point in turn (the gen-0 count stepped through the
    # call), for a record, a nested record, a masked array and a derived class's named
    # record array; the finalizer must have run inside each call.
    out = results(
        """
        import re
        import numpy as np
        rec = np.zeros(3, dtype=[("a", "<f4"), ("b", "<i8")])
        nested = np.zeros(3, dtype=[("a", [("x", "<f4"), ("y", "<i4")]), ("b", "<i8")])
        data, mask = np.arange(4.0), np.ones(4, dtype=bool)
        # The producers' dicts are made before any collection is armed (NumPy's, made on
        # each read, would be changed by the finalizer itself): only cai's are at stake.
        REC = {"data": (rec.ctypes.data, False), "shape": (3,), "typestr": "|V12", "descr": [("a", "<f4"), ("b", "<i8")], "version": 3}
        NESTED = {"data": (nested.ctypes.data, False), "shape": (3,), "typestr": "|V16",
                  "descr": [("a", [("x", "<f4"), ("y", "<i4")]), ("b", "<i8")], "version": 3}
        theirs = {id(REC["descr"]), id(NESTED["descr"]), id(NESTED["descr"][0][1])}
        class Record:
            __array_interface__ = property(lambda self: REC)
        class Nested:
            __array_interface__ = property(lambda self: NESTED)
        class Masked:
            @property
            def __array_interface__(self):
                return {"data": (data.ctypes.data, False), "shape": (4,), "typestr": "<f8", "version": 3, "mask": mask}
        kw = fx.Keywords()
        cases = {"record": lambda: fx.rust_as_array(Record()), "nested record": lambda: fx.rust_as_array(Nested()),
                 "masked": lambda: fx.rust_as_array(Masked()), "named record": lambda: kw.type}
        changed, inside, calling = [0], {name: 0 for name in cases}, [None]
        def fields(o):
            # A descr list of cai's: (name, typestr) pairs, the first one named (NumPy's
            # plain descr of a mask, [('', '|b1')], is not).
            return (type(o) is list and o and id(o) not in theirs
                    and all(type(e) is tuple and len(e) == 2 and type(e[0]) is str and type(e[1]) is str
                            and re.fullmatch("[<>|][a-zA-NP-Z][0-9]+", e[1]) for e in o)
                    and o[0][0] != "")
        def as_objects(fields):
            size = sum(int(t[2:]) for _, t in fields)
            return [(f"o{i}", "|O") for i in range(size // 8)] + ([("rest", f"|V{size % 8}")] if size % 8 else [])
        class Cycle:
            def __del__(self):
                if calling[0]:
                    inside[calling[0]] += 1
                for o in gc.get_objects():
                    if type(o) is dict and list(o)[:1] == ["shape"] and type(o["shape"]) is tuple and o["shape"] != (100_000_000,):
                        o["shape"] = (100_000_000,); o["strides"] = (1 << 30,); changed[0] += 1
                    elif fields(o):
                        o[:] = as_objects(o); changed[0] += 1
                    elif type(o) is tuple and len(o) in (2, 3) and type(o[0]) is str and fields(o[1]):
                        o[1][:] = as_objects(o[1]); changed[0] += 1
        class Junk:
            __slots__ = ()
        seen = {}
        for name, make in cases.items():
            seen[name] = set()
            gc.set_threshold(100)
            for k in range(60, 101):
                gc.disable(); gc.collect()
                c = Cycle(); c.self = c; del c
                junk = [Junk() for _ in range(k)]
                gc.enable()
                calling[0] = name
                v = make()
                calling[0] = None
                del junk
                seen[name].add((v.shape, v.strides, repr(v.descr)))
                gc.collect()
            gc.set_threshold(700)
        print({"seen": {n: sorted(s) for n, s in seen.items()}, "inside": all(inside.values()), "counts": inside})
        """
    )
    # Up to CPython 3.11 a collection starts at an allocation, inside cai's code; later
    # versions run it between bytecodes, so a route with no Python code between cai's
    # allocations (the derived class's named record) has no window there.
    if sys.version_info < (3, 12):
        assert out["inside"], out
    assert out["seen"] == {
        "record": [((3,), (12,), "[('a', '<f4'), ('b', '<i8')]")],
        "nested record": [((3,), (16,), "[('a', [('x', '<f4'), ('y', '<i4')]), ('b', '<i8')]")],
        "masked": [((4,), (8,), "[('', '<f8')]")],
        "named record": [((2,), (8,), "[('f0', '|u1'), ('', '|V3'), ('f2', '<f4')]")],
    }, out


def test_a_one_time_lookup_made_by_two_threads_at_once_finishes():
    # One thread's lookup sleeps in an import hook (the GIL released); another thread
    # needs the same lookup meanwhile. Neither may wait for the other forever.
    out = results(
        HOOKED
        + textwrap.dedent(
            """
        import time
        def slow():
            if threading.current_thread() is not threading.main_thread():
                time.sleep(0.3)
        hooked(("cai", "collections"), slow)
        found = {}
        t = threading.Thread(target=lambda: found.update(thread=cai.configure()["import_sync"]))
        t.start(); time.sleep(0.05)
        found["main"] = cai.configure()["import_sync"]
        t.join(10)
        print({"alive": t.is_alive(), **found})
        """
        )
    )
    assert out == {"alive": False, "main": "ignore", "thread": "ignore"}


def test_two_keys_that_read_the_same_are_refused():
    # A str subclass with its own hash makes a dict with two keys 'shape': which one a
    # consumer reads depends on how it looks keys up, so neither is trusted.
    out = results(
        """
        class Key(str):
            __hash__ = lambda s: 7
            __eq__ = lambda s, o: s is o
        def make():
            d = {"shape": (4,), "typestr": "<f4", "data": (PTR, False), "version": 3}
            d[Key("shape")] = (10**6,)
            return d
        print({**entries(make), "message": first(lambda: cai.from_cuda_array_interface(make())),
               "findings": cai.validate(make())})
        """
    )
    message = "shape: the dict has two keys that read 'shape'"
    assert out["message"].startswith(f"ValueError: {message}"), out
    assert [f for f in out["findings"] if f.startswith(message)], out
    assert {k: v for k, v in out.items() if k not in ("message", "findings")} == {
        "as_cuda_array": "ValueError", "from_cuda_array_interface": "ValueError", "validate": "findings:1",
        "extractor": "ValueError", "as_array": "ValueError",
    }


def test_a_dict_subclass_whose_lookup_disagrees_with_its_items_is_refused():
    # cai and NumPy read a dict's items; CuPy and Numba index it (d["data"]). A subclass
    # whose own lookup gives another value describes two arrays at once.
    out = results(
        """
        class Two(dict):
            def __getitem__(self, k):
                return (PTR + 4096, False) if k == "data" else dict.__getitem__(self, k)
        make = lambda: Two(shape=(4,), typestr="<f4", data=(PTR, False), version=3)
        print({**entries(make), "message": first(lambda: cai.from_cuda_array_interface(make())),
               "findings": cai.validate(P(lambda: make()))})
        """
    )
    message = (
        f"data: the interface dict, a Two, holds ({0x7F0000000000}, False) (tuple) but d['data'] gives "
        f"({0x7F0000000000 + 4096}, False) (tuple); consumers that look keys up and those that read the dict's items "
        "would read different arrays"
    )
    assert out["message"] == f"ValueError: {message}", out
    assert out["findings"] == [message], out
    assert {k: v for k, v in out.items() if k not in ("message", "findings")} == {
        "as_cuda_array": "ValueError", "from_cuda_array_interface": "ValueError", "validate": "findings:1",
        "extractor": "ValueError", "as_array": "ValueError",
    }


def test_dict_subclasses_whose_lookup_agrees_are_read_and_lookups_that_raise_or_interrupt_are_not():
    out = results(
        """
        import collections
        base = dict(shape=(4,), typestr="<f4", data=(PTR, False), version=3)
        class Copies(dict):  # equal values, new objects
            def __getitem__(self, k):
                v = dict.__getitem__(self, k)
                return tuple(v) if isinstance(v, tuple) else v
        class Hides(dict):
            def __getitem__(self, k):
                if k == "typestr":
                    raise KeyError(k)
                return dict.__getitem__(self, k)
        class Clears(dict):  # empties itself at the first lookup: the values read are held
            def __getitem__(self, k):
                v = dict.__getitem__(self, k)
                self.clear(); gc.collect()
                return v
        class Stops(dict):
            def __getitem__(self, k):
                raise KeyboardInterrupt
        print({
            "ordered": cai.as_cuda_array(P(lambda: collections.OrderedDict(base))).ptr == PTR,
            "copies": cai.as_cuda_array(P(lambda: Copies(base))).ptr == PTR,
            "hides": first(lambda: cai.as_cuda_array(P(lambda: Hides(base)))),
            "clears": first(lambda: cai.as_cuda_array(P(lambda: Clears(base)))),
            "stops": kind(lambda: cai.as_cuda_array(P(lambda: Stops(base)))),
            "stops in validate": kind(lambda: cai.validate(P(lambda: Stops(base)))),
        })
        """
    )
    assert out["ordered"] is True and out["copies"] is True, out
    assert out["hides"].startswith(
        "ValueError: typestr: the interface dict, a Hides, holds '<f4' (str) but d['typestr'] raised KeyError: "
    ), out
    assert out["clears"].startswith("ValueError: shape: ") and "but d.get('shape') gives None" in out["clears"], out
    assert out["stops"] == out["stops in validate"] == "KeyboardInterrupt", out


def test_a_dict_subclass_cannot_vouch_for_its_own_lookups():
    # Consumers read optional keys with d.get(...), and compare nothing: a value whose own
    # __eq__ calls everything equal, or a key only the lookups supply, is another array.
    out = results(
        """
        class AllEqual(int):
            __eq__ = lambda s, o: True
            __hash__ = int.__hash__
        class Liar(dict):
            def __getitem__(self, k):
                v = dict.__getitem__(self, k)
                return (AllEqual(PTR + 4096), False) if k == "data" else v
        class Getter(dict):
            def get(self, k, default=None):
                return (8,) if k == "strides" else dict.get(self, k, default)
        base = dict(shape=(4,), typestr="<f4", data=(PTR, False), version=3)
        print({name: first(lambda: cai.as_cuda_array(P(lambda: cls(base)))) for name, cls in
               [("liar", Liar), ("getter", Getter)]} | {"findings": cai.validate(P(lambda: Getter(base)))})
        """
    )
    assert out["liar"].startswith("ValueError: data: the interface dict, a Liar, holds ") and "but d['data'] gives (" in out["liar"], out
    getter = (
        "strides: the interface dict, a Getter, holds no 'strides' but d.get('strides') gives (8,) (tuple); consumers "
        "that look keys up and those that read the dict's items would read different arrays"
    )
    assert out["getter"] == f"ValueError: {getter}", out
    assert out["findings"] == [getter], out


def test_values_that_share_their_parts_are_read_and_compared_in_bounded_time():
    # Lists and tuples that share their parts are small in memory and vast when walked: a
    # descr of six lists of 64 entries, each entry the list below (64**6 fields), and a
    # dict subclass whose lookup gives an equal, new shape of seven levels of 100
    # references (100**7 leaves). Both are refused at once, with a message, not after
    # years or an exhausted memory.
    out = results(
        """
        import resource, time
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        L = [("x", "|u1")]
        for _ in range(6):
            L = [(f"f{i}", L) for i in range(64)]
        laughs = {"shape": (1,), "typestr": "|V1", "descr": L, "data": (PTR, False), "version": 3}
        def deep():
            x = 0
            for _ in range(7):
                x = (x,) * 100
            return x
        class Fresh(dict):
            def __getitem__(self, k): return deep() if k == "shape" else dict.__getitem__(self, k)
            def get(self, k, default=None): return deep() if k == "shape" else dict.get(self, k, default)
        # Long names shared by many entries, sub-array types nested 32 deep with 64
        # dimensions each, and long strs compared item by item.
        names = dict(laughs, typestr="|V65536", descr=[("n" * 65536, "|u1")] * 65536)
        t = "|u1"
        for _ in range(32):
            t = (t, (1,) * 64)
        dims = dict(laughs, typestr="|V65535", descr=[("", t, (1,) * 64)] * 65535)
        X = "x" * 10**7
        Y = X[:-1] + "x"  # equal, not the same object
        class Strs(dict):
            def __getitem__(self, k): return (X,) * 60000 if k == "shape" else dict.__getitem__(self, k)
            def get(self, k, default=None): return (X,) * 60000 if k == "shape" else dict.get(self, k, default)
        class Long(dict):
            def __getitem__(self, k): return [(X, "|u1")] if k == "descr" else dict.__getitem__(self, k)
            def get(self, k, default=None): return [(X, "|u1")] if k == "descr" else dict.get(self, k, default)
        start = time.monotonic()
        out = {
            "descr": first(lambda: cai.as_array(P(lambda: laughs, host=True))),
            "descr findings": cai.validate(P(lambda: laughs, host=True)),
            "lookup": first(lambda: cai.as_cuda_array(P(lambda: Fresh(shape=deep(), typestr="<f4", data=(PTR, False), version=3)))),
            "names": first(lambda: cai.as_array(P(lambda: names, host=True))),
            "dims": first(lambda: cai.as_array(P(lambda: dims, host=True))),
            "strs": first(lambda: cai.as_cuda_array(P(lambda: Strs(shape=(Y,) * 60000, typestr="<f4", data=(PTR, False), version=3)))),
            "long str": first(lambda: cai.as_cuda_array(
                P(lambda: Long(shape=(4,), typestr="|V1", descr=[(Y, "|u1")], data=(PTR, False), version=3)))),
        }
        out["seconds"] = time.monotonic() - start
        print(out)
        """
    )
    entries = (
        "it has more than 65536 entries and sub-array dimensions (those of nested records counted each time they "
        "appear)"
    )
    assert out["descr"].startswith("ValueError: descr: [") and out["descr"].endswith(entries), out["descr"][-300:]
    assert len(out["descr findings"]) == 1 and out["descr findings"][0].endswith(entries)
    assert out["dims"].endswith(entries), out["dims"][-300:]
    assert out["names"].endswith("its names and titles take more than 16777216 bytes"), out["names"][-300:]
    parts = "gives a value that is not the item itself and has more than 1048576 parts"
    assert out["lookup"].startswith("ValueError: shape: the interface dict, a Fresh, holds ((((")
    assert f"but d['shape'] {parts}" in out["lookup"]
    assert out["strs"].startswith("ValueError: shape: the interface dict, a Strs, holds (") and parts in out["strs"]
    assert out["long str"] is None  # one long str, equal: compared once, and read
    assert out["seconds"] < 30, out["seconds"]


def test_a_dict_subclass_whose_lookups_copy_a_large_descr_is_read():
    # Copies compare item by item; the budget takes a copy of 60,000 fields.
    out = results(
        """
        import copy
        class Copies(dict):
            def __getitem__(self, k): return copy.deepcopy(dict.__getitem__(self, k))
            def get(self, k, default=None): return copy.deepcopy(dict.get(self, k, default))
        fields = [("f%d" % i, "|u1") for i in range(60000)]
        d = Copies(shape=(2,), typestr="|V60000", descr=fields, data=(PTR, False), version=3)
        print({"fields": len(cai.as_cuda_array(P(lambda: d)).descr), "findings": cai.validate(P(lambda: d))})
        """
    )
    assert out == {"fields": 60000, "findings": []}


def run_with_stderr(code):
    """The finished scenario, for tests of what it writes to standard error (which `run`
    mixes into its output): with cai's variables unset, as a user's process has them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    r = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)], cwd=HERE, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r


def test_an_unraisable_hook_that_causes_the_report_it_handles_ends_before_the_c_stack(tmp_path):
    # A failure on a drop path (a hand-back, a DLPack deleter) goes to sys.unraisablehook,
    # Python code that may cause the same failure again: each report takes one nesting
    # level, and past the limit the exception is named on standard error instead.
    code = """
        reports = []
        def hook(u):
            reports.append(str(u.exc_value))
            fx.report_unraisable(f"report {len(reports)}")
        sys.unraisablehook = hook
        deep(lambda: fx.report_unraisable("report 0"), lambda call: call())
        print(len(reports), reports[0], reports[-1])
        """
    r = run_with_stderr(code)
    assert r.stdout.split() == ["64", "report", "0", "report", "63"], r.stdout
    assert r.stderr.strip() == (
        "Exception ignored: cai dropped an exception instead of reporting it through sys.unraisablehook, 64 levels "
        "of nested reads and reports deep on this thread, and drops any more so without a line until that level is "
        "left (a hook that causes the failures it reports?)"
    ), r.stderr[-2000:]


def test_an_unraisable_hook_that_causes_two_reports_for_each_it_handles_ends():
    # The depth limit alone would let such a hook run 2^64 times.
    code = """
        import time
        reports = [0]
        def hook(u):
            reports[0] += 1
            fx.report_unraisable("again")
            fx.report_unraisable("again")
        sys.unraisablehook = hook
        t = time.perf_counter()
        deep(lambda: fx.report_unraisable("first"), lambda call: call())
        print(reports[0], time.perf_counter() - t)
        """
    r = run_with_stderr(code)
    reports, seconds = r.stdout.split()
    assert 65536 <= int(reports) <= 65536 + 8 and float(seconds) < 60, r.stdout
    # The first branch reaches the depth limit; the count's limit ends the rest.
    start = "Exception ignored: cai dropped an exception instead of reporting it through sys.unraisablehook, "
    end = " (a hook that causes the failures it reports?)"
    more = ", and drops any more so without a line until that level is left"
    # One line for each limit, not one for each report dropped.
    assert r.stderr.strip().splitlines() == [
        start + "64 levels of nested reads and reports deep on this thread" + more + end,
        start + "65536 levels of reads and reports entered deep inside this thread's outermost one" + more + end,
    ], r.stderr[-2000:]


# -- DLPack: copies, deleters and keywords ------------------------------------------------------


def test_a_host_copy_reads_no_byte_between_strided_elements():
    # The elements lie on the first and the third of three pages, the second cannot be read;
    # a second array spans a terabyte of address space for two elements. Copying the span
    # crashed on the first and aborted on the second.
    out = run(
        """
        import ctypes, mmap
        import numpy as np
        from numpy.lib.stride_tricks import as_strided
        page = mmap.PAGESIZE
        m = mmap.mmap(-1, 3 * page)
        base = np.frombuffer(m, dtype=np.float32)
        x = as_strided(base, shape=(2,), strides=(2 * page,))
        x[:] = [1.0, 2.0]
        libc = ctypes.CDLL(None)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.mprotect(base.ctypes.data + page, page, 0) == 0
        print(np.from_dlpack(cai.as_array(x), copy=True).tolist())
        try:  # address space without memory behind it (MAP_NORESERVE)
            big = mmap.mmap(-1, 1 << 40, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)
        except OSError as e:
            print("no terabyte mapping:", e)
        else:
            y = as_strided(np.frombuffer(big, dtype=np.float32), shape=(2,), strides=(1 << 39,))
            y[:] = [3.0, 4.0]
            print(np.from_dlpack(cai.as_array(y), copy=True).tolist())
        """
    )
    lines = out.strip().splitlines()
    assert lines[0] == "[1.0, 2.0]"
    assert lines[1] in ("[3.0, 4.0]",) or lines[1].startswith("no terabyte mapping"), lines


def test_a_producer_deleter_runs_with_the_unwinding_exception_set_aside():
    # A view dies while an exception unwinds the frame that held it: the producer's
    # deleter, Python code through ctypes, ran with the exception set and lost it, and the
    # interpreter crashed on the exception that was no longer there.
    out = run(
        """
        import ctypes
        import numpy as np
        class DLDevice(ctypes.Structure):
            _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]
        class DLDataType(ctypes.Structure):
            _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
        class DLTensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                        ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]
        DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        class Managed(ctypes.Structure):
            _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                        ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        deleted = []
        def deleter(_):
            # ctypes raises, after the call, an exception that is set: here, one the
            # deleter was called with.
            try:
                ctypes.pythonapi.PyErr_Occurred()
                deleted.append(None)
            except BaseException as e:
                deleted.append(type(e).__name__)
        class Producer:
            def __init__(self, memory):
                self.memory = memory
                self.shape = (ctypes.c_int64 * 1)(memory.size)
                self.deleter = DELETER(deleter)
                self.managed = Managed(1, 0, None, self.deleter, 0, DLTensor(
                    memory.ctypes.data, DLDevice(1, 0), 1, DLDataType(2, 32, 1), self.shape, None, 0))
            def __dlpack_device__(self):
                return (1, 0)
            def __dlpack__(self, **kwargs):
                return new_capsule(ctypes.addressof(self.managed), b"dltensor_versioned", None)
        p = Producer(np.zeros(4, np.float32))
        for _ in range(3):
            try:
                [cai.from_dlpack(p), 1 / 0]
            except ZeroDivisionError:
                print("caught")
        print(deleted)
        """
    )
    assert out.split("\n")[:3] == ["caught"] * 3, out
    assert out.strip().splitlines()[-1] == "[None, None, None]", "the deleter saw no exception"


def test_every_reader_of_an_int_like_value_lets_an_interrupt_through():
    # Each place that reads an int or an `__index__` goes through one reader; an interrupt
    # raised by `__index__` must reach the caller from every one of them.
    out = results(
        """
        class Interrupting:
            def __index__(self): raise KeyboardInterrupt
        class SecondTime:
            '''An index past 63 bits first (read as unsigned, not asked again), then an interrupt.'''
            calls = 0
            def __index__(self):
                SecondTime.calls += 1
                if SecondTime.calls == 1:
                    return 2**63
                raise KeyboardInterrupt
        class CudaStream:
            def __init__(self, pair): self.pair = pair
            def __cuda_stream__(self): return self.pair
        class TorchLike:
            cuda_stream = Interrupting()
        class DeviceReporter:
            def __dlpack_device__(self): return (Interrupting(), 0)
            def __dlpack__(self, **kw): raise AssertionError("not reached")
        good = {"shape": (3, 4), "typestr": "<f4", "data": (PTR, False), "version": 3}
        import numpy as np
        view = cai.as_array(np.zeros(4, np.float32))

        out = {
            "version": kind(lambda: cai.as_cuda_array(P(lambda: dict(good, version=Interrupting())))),
            "descr field shape": kind(lambda: cai.as_cuda_array(
                P(lambda: dict(good, shape=(2,), typestr="|V16", descr=[("a", "<f4", (Interrupting(),))])))),
            "stream int-like": kind(lambda: cai.as_cuda_array(P(lambda: good), stream=Interrupting())),
            "__cuda_stream__ version": kind(lambda: cai.as_cuda_array(P(lambda: good), stream=CudaStream((Interrupting(), 5)))),
            "__cuda_stream__ handle": kind(lambda: cai.as_cuda_array(P(lambda: good), stream=CudaStream((0, Interrupting())))),
            ".cuda_stream": kind(lambda: cai.as_cuda_array(P(lambda: good), stream=TorchLike())),
            "export_version": kind(lambda: cai.configure(export_version=Interrupting())),
            "pointer_attributes": kind(lambda: cai.pointer_attributes(Interrupting())),
            "max_version": kind(lambda: view.__dlpack__(max_version=(Interrupting(), 0))),
            "dl_device": kind(lambda: view.__dlpack__(dl_device=(1, Interrupting()))),
            "__dlpack_device__": kind(lambda: cai.from_dlpack(DeviceReporter())),
            # A pointer past 63 bits is read as unsigned from the one int `__index__` gave.
            "past 63 bits": kind(lambda: cai.as_cuda_array(P(lambda: dict(good, data=(SecondTime(), False))), sync=False)),
            "__index__ calls": SecondTime.calls,
        }
        print(out)
        """
    )
    assert out.pop("past 63 bits") == "ok" and out.pop("__index__ calls") == 1, out
    assert out == {k: "KeyboardInterrupt" for k in out}, out


def test_a_finalizer_at_the_end_of_a_chain_frees_what_it_drops_at_once():
    # The producer at the end of a chain of views is released from inside the views'
    # releases; its `__del__` drops arrays through cai. Nested past four releases, those
    # were set aside until the outermost release returned: every array the finalizer
    # dropped stayed alive until it returned.
    out = run(
        """
        import weakref
        import numpy as np
        class Producer:
            def __init__(self): self.a = np.arange(4.0)
            @property
            def __array_interface__(self): return self.a.__array_interface__
            def __del__(self):
                kept = 0
                for _ in range(20):
                    big = np.ones(1000)
                    alive = weakref.ref(big)
                    v = cai.from_dlpack(big)
                    del big, v
                    kept += alive() is not None
                print(kept, end=" ")
        for links in range(1, 9):
            v = Producer()
            for _ in range(links):
                v = cai.as_array(v)
            del v
        print()
        """
    )
    assert out.split() == ["0"] * 8


def test_a_finalizer_at_the_end_of_a_long_chain_has_the_stack_it_would_have_at_the_top():
    # Past four releases, releases nest only while those under way take little stack:
    # the producer's `__del__` at the end of a chain of 2,000 views then recurses as deep
    # as it could at the top (some MB through `__repr__`, under a raised recursion limit;
    # CPython checks no stack size). Nesting until 2 MiB were left, it overflowed the
    # stack. From 3.12, CPython's own limit on C recursion may end the recursion first.
    out = run(
        """
        import sys
        import numpy as np
        sys.setrecursionlimit(100000)
        class R:
            def __init__(self, n): self.n = n
            def __repr__(self): return repr(R(self.n - 1)) if self.n else "x"
        class Producer:
            def __init__(self): self.a = np.arange(4.0)
            @property
            def __array_interface__(self): return self.a.__array_interface__
            def __del__(self):
                try:
                    repr(R(9000))
                    print("deep")
                except RecursionError:
                    print("limited")
        p = Producer()
        del p
        v = Producer()
        for _ in range(2000):
            v = cai.as_array(v)
        del v
        print("freed")
        """
    )
    top, chain, freed = out.split()
    assert top in ("deep", "limited") and chain == top and freed == "freed", out


@pytest.mark.parametrize(
    "where", ["main thread", "thread with a 512 KiB stack", "made on the main thread, freed on a 32 KiB stack"]
)
def test_freeing_a_long_chain_of_views_does_not_overflow_the_c_stack(where):
    # Each view holds the one before it (through a DLPack tensor's deleter, the owner of an
    # interface view, a NumPy array between two views, a mask array whose base is the
    # view before, or the interface dict the view keeps): freeing the last frees the
    # chain, one link inside the other's deallocation. A chain of some thousand links
    # overflowed the C stack (fewer in the debug build and on a small thread stack); in
    # the debug build, ten links freed on a thread of 32 KiB, the smallest stack
    # `threading.stack_size` takes, did while 50 releases could nest.
    links = 20000 if where == "main thread" else 3000
    out = run(
        f"""
        import numpy as np
        class Fresh:
            # A new interface dict at each read, which alone holds the view before.
            def __init__(self, ai): self.ai = ai
            @property
            def __array_interface__(self): return dict(self.ai)
        def chains():
            for kind in ("from_dlpack", "as_array", "numpy between", "mask", "interface"):
                x = np.arange(4.0) if kind != "mask" else np.array([True, False, True, False])
                v = cai.as_array(x)
                ai = {{"shape": (4,), "typestr": x.dtype.str, "data": (x.ctypes.data, False), "version": 3}}
                for _ in range({links}):
                    if kind == "from_dlpack":
                        v = cai.from_dlpack(v)
                    elif kind == "as_array":
                        v = cai.as_array(v)
                    elif kind == "numpy between":
                        v = np.from_dlpack(cai.as_array(v))
                    elif kind == "mask":
                        # The mask is a NumPy array (no trashcan) whose base is the view before.
                        v = cai.as_array(Fresh(dict(ai, mask=np.asarray(v))))
                    else:
                        v = cai.as_array(Fresh(dict(ai, __ref=v)))
                assert np.asarray(v).tolist() == x.tolist()
                if {where.startswith("made")}:
                    # Freed by a thread whose stack holds little more than the release.
                    box = [v]
                    del v
                    threading.stack_size(32 * 1024)
                    t = threading.Thread(target=box.clear)
                    t.start()
                    t.join()
                    threading.stack_size(0)
                    assert not box
                else:
                    del v
                print("freed", kind.replace(" ", "-"))
        if {where != "thread with a 512 KiB stack"}:
            chains()
        else:
            threading.stack_size(512 * 1024)
            t = threading.Thread(target=chains)
            t.start()
            t.join()
        """
    )
    assert out.split() == ["freed", "from_dlpack", "freed", "as_array", "freed", "numpy-between", "freed", "mask", "freed", "interface"]
