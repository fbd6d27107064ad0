"""A bounded fuzz test: 3,000 generated cases (six fixed seeds of 500) of a producer and its interface
dict, read through every entry point in a child interpreter.

The dicts mix ordinary values with hostile ones: an `__index__` or `__repr__` that clears,
frees or mutates the dict, collects garbage, raises (an ordinary exception, `MemoryError`
or `KeyboardInterrupt`) or calls cai again on the producer; keys that are `str` subclasses
or other objects with a real key's hash and a hostile `__eq__`; masks that are dicts,
`None`, other generated producers or the producer itself. The producers return the dict
from a property or hold it as an attribute, or their property raises, returns a dict
subclass or another mapping whose methods are hostile, or calls cai on itself. Dicts of a
version above 3 may meet a `warnings` hook that is hostile too, or an "error" filter.

A crash of the child, a `PanicException`, an exception of a class the rules do not allow
(or, where the property itself raises, any other outcome than its exception, a finding of
`validate` or the `TypeError` of an `AttributeError`) fails the test, with the cases that
did it.
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
# What hostile code does: see `act` in the child.
ACTIONS = ["clear", "free", "raise", "zerodiv", "nomem", "interrupt", "mutate", "gc", "recurse", "revalidate"]
HOSTILE = [f"{method}-{action}" for method in ("index", "repr") for action in ACTIONS]
METHODS = ["__getitem__", "get", "keys", "__iter__", "items", "__len__"]
RAISED = ["ValueError", "AttributeError", "KeyboardInterrupt", "MemoryError", "RecursionError", "ZeroDivisionError"]

CHILD = textwrap.dedent(
    """
    import collections.abc, gc, json, sys, types, warnings
    import cai, cai_fixtures as fx
    warnings.simplefilter("ignore")

    # Hostile code acts only while cai runs ("armed"), not while the harness builds a case.
    state = {"armed": False, "nest": 0, "collections": 0, "recursions": 0}
    current = {}  # "d": the dict built last, "p": the producer being read
    RAISES = {"raise": ValueError, "zerodiv": ZeroDivisionError, "nomem": MemoryError, "interrupt": KeyboardInterrupt}
    EXC = {c.__name__: c for c in (ValueError, AttributeError, KeyboardInterrupt, MemoryError, RecursionError, ZeroDivisionError)}

    def disarmed(f, *args):
        armed, state["armed"] = state["armed"], False
        try:
            return f(*args)
        finally:
            state["armed"] = armed

    def mutate(d):
        for k in list(dict.keys(d))[:8]:
            dict.__setitem__(d, k, (7, "replaced"))
        for i in range(64):
            dict.__setitem__(d, f"extra{i}", [i])

    def again(validate):
        # Calls that each call cai again from several values branch: cai bounds that (65,536
        # levels), test_hostile.py tests it, and here a call stops recursing after 2,000 of
        # them, depth first, so that the 64 nested reads are still reached in seconds.
        p = current.get("p")
        state["recursions"] += 1
        if p is None or state["recursions"] > 2000:
            return
        if validate:
            cai.validate(p)
        else:
            (cai.as_array if current.get("host") else cai.as_cuda_array)(p)

    def collect():
        # Past 100 full collections in one call (code that calls cai again repeats them),
        # the youngest generation only.
        state["collections"] += 1
        gc.collect(0 if state["collections"] > 100 else 2)

    def act(action):
        if not state["armed"]:
            return
        d = current.get("d")
        if action == "clear":
            if isinstance(d, dict):
                disarmed(dict.clear, d)
            collect()
        elif action == "free":
            current.clear(); collect()
        elif action in RAISES:
            raise RAISES[action]("hostile")
        elif action == "mutate":
            if isinstance(d, dict):
                disarmed(mutate, d)
        elif action == "gc":
            collect()
        elif action in ("recurse", "revalidate"):
            again(action == "revalidate")

    class Hostile:
        def __init__(self, kind, value):
            self.kind, self.value = kind, value
        def _act(self, method):
            if self.kind.startswith(method):
                act(self.kind.split("-", 1)[1])
        def __index__(self):
            self._act("index")
            return self.value
        def __repr__(self):
            self._act("repr")
            return "Hostile()"

    class EvilKey(str):
        '''A key with the hash of the real key it spells, equal to nothing but itself.'''
        def __new__(cls, name, action):
            self = str.__new__(cls, name)
            self.action = action
            return self
        def __hash__(self):
            act(self.action)
            return str.__hash__(self)
        def __eq__(self, other):
            act(self.action)
            return self is other

    class Collide:
        '''A key that is no str, with the hash of a real key.'''
        def __init__(self, name, action):
            self.name, self.action = name, action
        def __hash__(self):
            return hash(self.name)
        def __eq__(self, other):
            act(self.action)
            return self is other
        def __repr__(self):
            act(self.action)
            return "Collide()"

    def garbage(method):
        return {"__getitem__": (10**6,), "get": "junk", "keys": ["shape", 1], "__iter__": iter([1, None]),
                "items": [("shape", None)], "__len__": 10**6}[method]

    def hostile_method(method):
        def f(self, *args):
            action = getattr(self, "acts", {}).get(method)
            if action == "garbage" and state["armed"]:
                return garbage(method)
            if action:
                act(action)
            # A Map reads the dict it wraps; a Sub is the dict.
            return getattr(dict, method)(getattr(self, "under", self), *args)
        return f

    class Methods:
        '''A mapping's methods, each hostile where the case names it in `acts`.'''
        __getitem__ = hostile_method("__getitem__")
        get = hostile_method("get")
        keys = hostile_method("keys")
        __iter__ = hostile_method("__iter__")
        items = hostile_method("items")
        __len__ = hostile_method("__len__")

    class Sub(Methods, dict):
        '''A dict subclass whose methods may be hostile.'''

    class Map(Methods, collections.abc.Mapping):
        '''Another mapping over a dict, whose methods may be hostile.'''
        def __init__(self, under, acts):
            self.under, self.acts = under, acts

    def build(spec, outer):
        tag = spec[0]
        if tag == "int": return int(spec[1])
        if tag == "str": return spec[1]
        if tag == "float": return float(spec[1])
        if tag == "bool": return bool(spec[1])
        if tag == "none": return None
        if tag == "tuple": return tuple(build(s, outer) for s in spec[1])
        if tag == "list": return [build(s, outer) for s in spec[1]]
        if tag == "hostile": return Hostile(spec[1], int(spec[2]))
        if tag == "dict": return items(spec[1], outer)
        if tag == "producer": return producer(spec[1], False, outer)
        if tag == "outer": return outer
        raise AssertionError(spec)

    def key(spec):
        if isinstance(spec, str): return spec
        if spec[0] == "evilkey": return EvilKey(spec[1], spec[2])
        if spec[0] == "collide": return Collide(spec[1], spec[2])
        raise AssertionError(spec)

    def items(pairs, outer):
        d = {}
        for k, v in pairs:
            d[key(k)] = build(v, outer)
        current["d"] = d
        return d

    def interface(case, outer, plain=False):
        '''What the producer's attribute holds (the dict itself where `plain`), built disarmed.'''
        def make():
            d = items(case["items"], outer)
            kind = case["producer"]
            if plain or kind[0] in ("property", "attribute", "raise", "recurse", "recurse-once"):
                return d
            if kind[0] == "subclass":
                s = Sub(d)
                s.acts = kind[1]
                current["d"] = s
                return s
            if kind[0] == "proxy":
                return types.MappingProxyType(d)
            if kind[0] == "mapping":
                return Map(d, kind[1])
            raise AssertionError(kind)
        return disarmed(make)

    class P:
        def __init__(self, case, host, outer):
            self.case, self.host, self.outer = case, host, outer if outer is not None else self
        def _read(self, host):
            if host != self.host:
                raise AttributeError("__array_interface__" if host else "__cuda_array_interface__")
            kind = self.case["producer"]
            if kind[0] == "raise":
                raise EXC[kind[1]]("hostile property")
            if kind[0] == "recurse" or (kind[0] == "recurse-once" and state["nest"] == 0):
                state["nest"] += 1
                try:
                    r = cai.validate(self) if kind[1] == "validate" else (cai.as_array if self.host else cai.as_cuda_array)(self)
                finally:
                    state["nest"] -= 1
                if kind[0] == "recurse":
                    return r
            return interface(self.case, self.outer)
        @property
        def __cuda_array_interface__(self):
            return self._read(False)
        @property
        def __array_interface__(self):
            return self._read(True)

    class Stored:
        '''A producer whose interface is an instance attribute, built once.'''

    def producer(case, host, outer=None):
        if case["producer"][0] != "attribute":
            return P(case, host, outer)
        p = Stored()
        setattr(p, "__array_interface__" if host else "__cuda_array_interface__", interface(case, outer if outer is not None else p))
        return p

    ALLOWED = {"TypeError", "ValueError", "BufferError", "CudaDriverError", "RecursionError", "OverflowError"}
    UNCHANGED = {"KeyboardInterrupt", "MemoryError", "RecursionError"}  # propagate from anywhere

    def raised(case):
        '''The classes a case's code raises: anywhere, and as a property's or a warning's own.'''
        anywhere, own = set(), set()
        def go(x):
            if isinstance(x, dict):
                kind = x.get("producer", [None])
                if kind[0] == "raise":
                    anywhere.add(kind[1]); own.add(kind[1])
                if kind[0] in ("subclass", "mapping"):
                    anywhere.update(RAISES[a].__name__ for a in kind[1].values() if a in RAISES)
                warn = x.get("warn")
                if warn and warn["hook"] in RAISES:
                    anywhere.add(RAISES[warn["hook"]].__name__); own.add(RAISES[warn["hook"]].__name__)
                if warn and warn["filter"] == "error":
                    own.add("RuntimeWarning")
                for v in x.values():
                    go(v)
            elif isinstance(x, list):
                action = x[1].split("-", 1)[1] if x[:1] == ["hostile"] else x[2] if x[:1] in (["evilkey"], ["collide"]) else None
                if action in RAISES:
                    anywhere.add(RAISES[action].__name__)
                for v in x:
                    go(v)
        go(case)
        return anywhere, own

    def allowed(case):
        '''The classes the imports and validate may raise.'''
        anywhere, own = raised(case)
        validating = ALLOWED | (anywhere & UNCHANGED)
        # A property's or a warning's own exception propagates from the imports (an
        # AttributeError reads as no interface); validate reports the ordinary ones.
        return validating | (own - {"AttributeError"}), validating

    def expected(case, name):
        '''What an entry point must give where the property itself raises.'''
        kind = case["producer"]
        if kind[0] != "raise" or name == "from_cuda_array_interface":
            return None
        if kind[1] == "AttributeError":
            return "TypeError"
        if name == "validate" and kind[1] not in UNCHANGED:
            return "findings"
        return kind[1]

    def run_case(case):
        imports, validating = allowed(case)
        bad = []
        calls = [
            ("as_cuda_array", False, lambda p, v: cai.as_cuda_array(p)),
            ("from_cuda_array_interface", False, lambda p, v: cai.from_cuda_array_interface(v)),
            ("validate", False, lambda p, v: cai.validate(p)),
            ("as_array", True, lambda p, v: cai.as_array(p)),
            ("extractor", False, lambda p, v: fx.describe_f32(p)),
            ("host extractor", True, lambda p, v: fx.host_shape_f32(p)),
        ]
        for name, host, call in calls:
            with warnings.catch_warnings():
                warn = case.get("warn")
                if warn:
                    warnings.simplefilter(warn["filter"])
                    if warn["hook"]:
                        warnings.showwarning = lambda *a, _h=warn["hook"], **k: act(_h)
                p = producer(case, host)
                v = interface(case, p, plain=case["producer"][0] in ("raise", "recurse", "recurse-once")) if not host else None
                current["p"], current["host"] = p, host
                outcome = "ok"
                state["armed"] = True
                try:
                    r = call(p, v)
                    if name == "validate":
                        assert isinstance(r, list) and all(isinstance(m, str) for m in r), r
                        outcome = "findings" if r else "ok"
                    elif name.endswith("extractor"):
                        assert isinstance(r, (tuple, list)), r
                    else:
                        r.shape, r.strides, r.nbytes, r.is_c_contiguous, r.__cuda_array_interface__ if not host else r.__array_interface__
                except BaseException as e:
                    outcome = type(e).__name__
                    if outcome not in (validating if name == "validate" else imports):
                        bad.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
                finally:
                    state["armed"] = False
                    state["nest"] = state["collections"] = state["recursions"] = 0
                want = expected(case, name)
                if want is not None and outcome != want:
                    bad.append(f"{name}: {outcome} where the property raised {case['producer'][1]} (expected {want})")
                r = p = v = None
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


def mask(rng, nesting, shape=None):
    """None, a dict, another generated producer (dicts and producers nest at most twice) or the
    outer producer."""
    roll = rng.random()
    if roll < 0.2:
        return ["none"]
    if roll < 0.35:
        return ["outer"]
    if roll < 0.5 and nesting < 2:
        return ["dict", valid(rng, nesting + 1, shape) if rng.random() < 0.5 else pairs(rng, nesting + 1)]
    if 0.5 <= roll < 0.8 and nesting < 2:
        return ["producer", case(rng, nesting + 1, shape)]
    return value(rng)


def plausible(rng, key, nesting=0):
    """Values close to a valid entry half the time, so that the reader gets past the first check."""
    if key == "mask" and rng.random() < 0.7:
        return mask(rng, nesting)
    if rng.random() < 0.5:
        return value(rng)
    if key == "shape":
        return ["tuple", [["int", rng.randint(0, 6)] if rng.random() < 0.8 else atom(rng) for _ in range(rng.randint(0, 3))]]
    if key == "typestr":
        return ["str", rng.choice(["<f4", "|u1", "<f8", "|V8"])]
    if key == "data":
        return ["tuple", [["int", 0x7F0000000000] if rng.random() < 0.7 else atom(rng), ["bool", False] if rng.random() < 0.7 else atom(rng)]]
    if key == "version":
        return ["int", rng.randint(0, 5)] if rng.random() < 0.8 else atom(rng)
    return value(rng)


def pairs(rng, nesting=0):
    keys = rng.sample(KEYS + ["extra"], rng.randint(2, 8))
    out = [[k, plausible(rng, k, nesting)] for k in keys]
    if rng.random() < 0.15:
        # A key with a real key's hash and a hostile __eq__: a str subclass or another object.
        name = rng.choice(KEYS)
        out.insert(rng.randint(0, len(out)), [[rng.choice(["evilkey", "collide"]), name, rng.choice(ACTIONS)], value(rng)])
    return out


def hostile(rng, spec):
    """The spec with one int in it made a hostile int-like, or the whole of it a hostile object."""
    if spec[0] == "int":
        return ["hostile", rng.choice(HOSTILE), spec[1]]
    if spec[0] in ("tuple", "list") and spec[1] and rng.random() < 0.8:
        i = rng.randrange(len(spec[1]))
        return [spec[0], spec[1][:i] + [hostile(rng, spec[1][i])] + spec[1][i + 1 :]]
    return ["hostile", rng.choice(HOSTILE), rng.choice(INTS)]


def valid(rng, nesting=0, shape=None):
    """A valid dict (a mask's where its array's shape is given), with up to three entries made
    hostile or wrong: most hostile code runs only once the reader is past the first checks."""
    is_mask = shape is not None
    shape = shape or ["tuple", [["int", rng.randint(0, 5)] for _ in range(rng.randint(0, 3))]]
    out = [
        ["version", ["int", 3]],
        ["shape", shape],
        ["typestr", ["str", "|b1" if is_mask else "<f4"]],
        ["data", ["tuple", [["int", 0x7F0000000000 + 4096 * is_mask], ["bool", False]]]],
    ]
    if rng.random() < 0.3:
        out.append(["strides", ["none"]])
    if rng.random() < 0.3:
        out.append(["stream", rng.choice([["none"], ["int", 7]])])
    if rng.random() < 0.2:
        out.append(["descr", ["list", [["tuple", [["str", ""], ["str", "|b1" if is_mask else "<f4"]]]]]])
    if rng.random() < 0.5:
        out.append(["mask", mask(rng, nesting, shape)])
    rng.shuffle(out)
    for _ in range(rng.randint(0, 3)):
        entry = rng.choice(out)
        entry[1] = hostile(rng, entry[1]) if rng.random() < 0.7 else plausible(rng, entry[0], nesting)
    return out


def hostile_methods(rng):
    """One to three of a mapping's methods, each with what it does."""
    return {m: rng.choice(ACTIONS + ["garbage"]) for m in rng.sample(METHODS, rng.randint(1, 3))}


def producer_kind(rng):
    roll = rng.random()
    if roll < 0.4:
        return ["property"]
    if roll < 0.5:
        return ["attribute"]
    if roll < 0.6:
        return ["raise", rng.choice(RAISED)]
    if roll < 0.75:
        return ["subclass", hostile_methods(rng)]
    if roll < 0.8:
        return ["proxy"]
    if roll < 0.88:
        return ["mapping", hostile_methods(rng)]
    return [rng.choice(["recurse", "recurse-once", "recurse-once"]), rng.choice(["as_cuda_array", "validate"])]


def case(rng, nesting=0, shape=None):
    items = valid(rng, nesting, shape) if rng.random() < 0.5 else pairs(rng, nesting)
    out = {"producer": producer_kind(rng), "items": items}
    if nesting == 0 and rng.random() < 0.2:
        # A version above 3 warns: through a hook that may be hostile, or as an error.
        out["warn"] = {"filter": rng.choice(["always", "error"]), "hook": rng.choice([None] + ACTIONS)}
        if rng.random() < 0.7:
            out["items"] = [p for p in out["items"] if p[0] != "version"] + [["version", ["int", rng.choice([4, 5])]]]
    return out


def run_child(batch):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAI_")}
    env.update(CAI_CHECK_POINTERS="0", CAI_IMPORT_SYNC="ignore")
    return subprocess.run(
        [sys.executable, "-c", CHILD], input=json.dumps(batch), cwd=HERE, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("seed", range(6))
def test_generated_producers_never_crash_or_raise_the_wrong_class(seed):
    rng = random.Random(seed)
    batch = [case(rng) for _ in range(500)]
    r = run_child(batch)
    if r.returncode != 0 or "PanicException" in r.stderr + r.stdout:
        # Find the first case that kills the child on its own.
        for suspect in batch:
            one = run_child([suspect])
            assert one.returncode == 0 and "PanicException" not in one.stderr + one.stdout, (
                f"case {json.dumps(suspect)} crashed the interpreter (exit {one.returncode}):\n{one.stderr[-3000:]}"
            )
        pytest.fail(f"the batch crashed the interpreter (exit {r.returncode}), no case alone did:\n{r.stderr[-3000:]}")
    problems = json.loads(r.stdout.strip().splitlines()[-1])
    assert not problems, {json.dumps(batch[int(i)]): p for i, p in problems.items()}
