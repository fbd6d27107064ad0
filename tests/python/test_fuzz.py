"""A bounded fuzz test: 1,500 generated interface dicts (fixed seeds), with hostile values among ordinary ones
(an `__index__` or `__repr__` that clears the dict, raises, or interrupts), read through
every entry point in a child interpreter. A crash of the child, a `PanicException` or an
exception of a class the rules do not allow fails the test, with the cases that did it.
"""

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest


HERE = os.path.dirname(__file__)
KEYS = ["shape", "typestr", "descr", "data", "version", "strides", "mask", "stream"]
HOSTILE = ["index-clear", "index-raise", "index-interrupt", "repr-clear", "repr-raise", "repr-interrupt", "index-free"]

CHILD = textwrap.dedent(
    """
    import gc, json, sys, warnings
    import cai, cai_fixtures as fx
    warnings.simplefilter("ignore")

    current = {}

    class Hostile:
        def __init__(self, kind, value):
            self.kind, self.value = kind, value
        def _act(self, method):
            if not self.kind.startswith(method):
                return
            action = self.kind.split("-", 1)[1]
            if action == "clear":
                current.get("d", {}).clear(); gc.collect()
            elif action == "free":
                current.clear(); gc.collect()
            elif action == "raise":
                raise ValueError("hostile")
            elif action == "interrupt":
                raise KeyboardInterrupt("hostile")
        def __index__(self):
            self._act("index")
            return self.value
        def __repr__(self):
            self._act("repr")
            return "Hostile()"

    def build(spec):
        tag = spec[0]
        if tag == "int": return int(spec[1])
        if tag == "str": return spec[1]
        if tag == "float": return float(spec[1])
        if tag == "bool": return bool(spec[1])
        if tag == "none": return None
        if tag == "tuple": return tuple(build(s) for s in spec[1])
        if tag == "list": return [build(s) for s in spec[1]]
        if tag == "hostile": return Hostile(spec[1], int(spec[2]))
        raise AssertionError(spec)

    class P:
        def __init__(self, make, host=False):
            self.make, self.host = make, host
        @property
        def __cuda_array_interface__(self):
            if self.host: raise AttributeError("__cuda_array_interface__")
            return self.make()
        @property
        def __array_interface__(self):
            if not self.host: raise AttributeError("__array_interface__")
            return self.make()

    ALLOWED = {"TypeError", "ValueError", "BufferError", "CudaDriverError", "RecursionError", "OverflowError"}

    def run_case(case):
        def make():
            d = {k: build(v) for k, v in case}
            current["d"] = d
            return d
        bad = []
        interrupts = any("interrupt" in json.dumps(v) for _, v in case)
        calls = [
            ("as_cuda_array", lambda: cai.as_cuda_array(P(make))),
            ("from_cuda_array_interface", lambda: cai.from_cuda_array_interface(make())),
            ("validate", lambda: cai.validate(P(make))),
            ("as_array", lambda: cai.as_array(P(make, host=True))),
            ("extractor", lambda: fx.describe_f32(P(make))),
            ("host extractor", lambda: fx.host_shape_f32(P(make, host=True))),
        ]
        for name, call in calls:
            try:
                r = call()
                if name == "validate":
                    assert isinstance(r, list) and all(isinstance(m, str) for m in r)
                elif name.endswith("extractor"):
                    assert isinstance(r, (tuple, list)), r
                else:
                    r.shape, r.strides, r.nbytes, r.is_c_contiguous, r.__cuda_array_interface__ if name != "as_array" else r.__array_interface__
            except KeyboardInterrupt:
                if not interrupts:
                    bad.append(f"{name}: KeyboardInterrupt without a hostile interrupt")
            except BaseException as e:
                if type(e).__name__ not in ALLOWED:
                    bad.append(f"{name}: {type(e).__name__}: {e}")
            current.clear()
        return bad

    cases = json.loads(sys.stdin.read())
    problems = {}
    for i, case in enumerate(cases):
        bad = run_case(case)
        if bad:
            problems[i] = bad
    print(json.dumps(problems))
    """
)

INTS = [0, 1, 2, 3, 4, 5, 7, 16, 70, -1, -3, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), 0x7F0000000000]
TYPESTRS = ["<f4", "<f8", "|u1", "|b1", "<i4", "|V8", "<c8", "<f3", "", "f4", "<M8[ns]", "<U2", "<f\ud800", ">f4"]


def atom(rng):
    tag = rng.choice(["int", "int", "str", "float", "bool", "none", "hostile"])
    if tag == "int":
        return ["int", rng.choice(INTS)]
    if tag == "str":
        return ["str", rng.choice(TYPESTRS)]
    if tag == "float":
        return ["float", rng.choice([0.0, 4.0])]
    if tag == "bool":
        return ["bool", rng.random() < 0.5]
    if tag == "none":
        return ["none"]
    return ["hostile", rng.choice(HOSTILE), rng.choice(INTS)]


def value(rng, depth=0):
    roll = rng.random()
    if depth < 2 and roll < 0.3:
        return ["tuple", [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]]
    if depth < 2 and roll < 0.4:
        return ["list", [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]]
    return atom(rng)


def plausible(rng, key):
    """Values close to a valid entry half the time, so that the reader gets past the first check."""
    if rng.random() < 0.5:
        return value(rng)
    if key == "shape":
        return ["tuple", [["int", rng.randint(0, 6)] if rng.random() < 0.8 else atom(rng) for _ in range(rng.randint(0, 3))]]
    if key == "typestr":
        return ["str", rng.choice(["<f4", "|u1", "<f8", "|V8"])]
    if key == "data":
        return ["tuple", [["int", 0x7F0000000000] if rng.random() < 0.7 else atom(rng), ["bool", False] if rng.random() < 0.7 else atom(rng)]]
    if key == "version":
        return ["int", rng.randint(0, 4)] if rng.random() < 0.8 else atom(rng)
    return value(rng)


def case(rng):
    keys = rng.sample(KEYS + ["extra"], rng.randint(2, 8))
    return [[k, plausible(rng, k)] for k in keys]


def run_child(batch):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    env.update(CAI_CHECK_POINTERS="0", CAI_IMPORT_SYNC="ignore")
    return subprocess.run(
        [sys.executable, "-c", CHILD], input=json.dumps(batch), cwd=HERE, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("seed", range(6))
def test_generated_dicts_never_crash_or_raise_the_wrong_class(seed):
    rng = random.Random(seed)
    batch = [case(rng) for _ in range(250)]
    r = run_child(batch)
    if r.returncode != 0 or "PanicException" in r.stderr:
        # Find the first case that kills the child on its own.
        for suspect in batch:
            one = run_child([suspect])
            assert one.returncode == 0 and "PanicException" not in one.stderr, (
                f"case {json.dumps(suspect)} crashed the interpreter (exit {one.returncode}):\n{one.stderr[-3000:]}"
            )
        pytest.fail(f"the batch crashed the interpreter (exit {r.returncode}), no case alone did:\n{r.stderr[-3000:]}")
    problems = json.loads(r.stdout.strip().splitlines()[-1])
    assert not problems, {json.dumps(batch[int(i)]): p for i, p in problems.items()}
