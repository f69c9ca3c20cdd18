from dataclasses import replace

import pytest

from tsevo.evolve.cluster import ClusteringError, cluster_errors
from tsevo.evolve.config import ProtocolConfig
from tsevo.roles.builtin import ClusterTriage
from tsevo.roles.protocols import Category, ErrorItem


def _errors(n_per=20):
    out = []
    for i in range(n_per):
        out.append(
            ErrorItem(
                f"t{i:03d}",
                f"Is the trend over the {i} samples upward or downward?",
                ("upward", "downward", "flat"),
            )
        )
        out.append(
            ErrorItem(
                f"p{i:03d}",
                "What is the dominant period of the seasonal cycle?",
                ("12", "24", "7"),
                tool_fired=i % 4 == 0,
            )
        )
        out.append(
            ErrorItem(
                f"m{i:03d}",
                "Which candidate series best matches the reference?",
                ("A", "B", "C"),
                n_candidates=3,
            )
        )
    return out


CFG = ProtocolConfig()


def test_builtin_triage_separates_question_kinds():
    res = cluster_errors(_errors(), ClusterTriage(), CFG)
    no_tool = [b for b in res.buckets if b.side == "no_tool"]
    prefixes = [{m[0] for m in b.members} for b in no_tool]
    assert all(len(p) == 1 for p in prefixes), prefixes
    assert {next(iter(p)) for p in prefixes} == {"t", "p", "m"}
    assert any(b.side == "tool_fired" for b in res.buckets)
    n_in = sum(len(b.members) for b in res.buckets) + len(res.unassigned) + len(res.dropped_small)
    assert n_in == 60


class Flaky:
    """A triage role that violates the contract in scripted ways."""

    name = "flaky"

    def __init__(self, define_failures=0, drop_ids=(), bad_batches=0):
        self.define_failures = define_failures
        self.drop_ids = set(drop_ids)
        self.bad_batches = bad_batches
        self.inner = ClusterTriage()

    def define(self, errors, k):
        if self.define_failures:
            self.define_failures -= 1
            raise ValueError("malformed JSON")
        return self.inner.define(errors, k)

    def assign(self, cats, batch):
        if self.bad_batches:
            self.bad_batches -= 1
            return {e.qid: "nope" for e in batch}
        r = self.inner.assign(cats, batch)
        return {k: v for k, v in r.items() if k not in self.drop_ids}


def test_define_retries_then_failure_invalidates():
    res = cluster_errors(_errors(5), Flaky(define_failures=2), CFG)
    assert res.define_calls >= 3 and res.invalid_replies == 2
    with pytest.raises(ClusteringError):
        cluster_errors(_errors(5), Flaky(define_failures=3), CFG)


def test_assign_contract_missing_ids_retried_then_failure_invalidates():
    # a batch whose replies keep missing an id fails after its retries: the clustering is
    # invalid (the round rolls back) instead of silently dropping the batch
    with pytest.raises(ClusteringError, match="assign failed"):
        cluster_errors(_errors(5), Flaky(drop_ids={"t001"}), CFG)
    res2 = cluster_errors(_errors(5), Flaky(bad_batches=2), CFG)
    assert not res2.unassigned and res2.invalid_replies == 2


class OneThenInner(Flaky):
    def define(self, errors, k):
        if not getattr(self, "done", False):
            self.done = True
            return [Category("c1", "all", "everything", {"upward": 1.0, "spectra": 1.0})]
        return self.inner.define(errors, k)


def test_resplit_once_and_drop_small():
    cfg = CFG.replace(resplit_above=8)
    errs = [
        ErrorItem(
            f"a{i}",
            f"Is the trend upward {'strongly' if i % 2 else 'weakly'}?",
            ("upward", "downward"),
        )
        for i in range(20)
    ]
    errs.append(ErrorItem("lonely", "completely different question about spectra", ("x", "y")))
    res = cluster_errors(errs, OneThenInner(), cfg)
    assert res.splits == ["no_tool.c1"]
    assert {b.parent for b in res.buckets} == {"no_tool.c1"}
    assert all(len(b.members) >= 2 for b in res.buckets)
    assert (
        sum(len(b.members) for b in res.buckets) + len(res.unassigned) + len(res.dropped_small)
        == 21
    )


class Scripted:
    name = "scripted"

    def define(self, errors, k):
        return [Category("c1", "big", "most"), Category("c2", "small", "one")]

    def assign(self, cats, batch):
        return {e.qid: ("c2" if e.qid == "x0" else "c1") for e in batch}


def test_buckets_below_minimum_are_dropped_and_reported():
    errs = [ErrorItem(f"x{i}", "q", ("a", "b")) for i in range(5)]
    res = cluster_errors(errs, Scripted(), CFG)
    assert res.dropped_small == ["x0"]
    assert [b.members for b in res.buckets] == [("x1", "x2", "x3", "x4")]


def test_category_roundtrip():
    c = Category("c1", "trend", "crit", {"trend": 0.5})
    assert Category.from_dict(c.to_dict()) == c
    assert replace(c, label="x").label == "x"


_VOCAB = [
    "amber",
    "basalt",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "jasper",
    "kelp",
    "lagoon",
    "meadow",
    "nectar",
    "onyx",
    "prairie",
    "quartz",
    "rapids",
    "sierra",
    "tundra",
    "umber",
    "valley",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
    "aspen",
    "birch",
    "cedar",
    "delta",
    "estuary",
    "fern",
    "glacier",
    "heath",
    "isle",
    "juniper",
    "knoll",
    "larch",
    "marsh",
]


def _many_kinds(n_kinds=30, per=2):
    """Errors of ``n_kinds`` templates (no two alike in wording), ``per`` errors each."""
    out = []
    for k in range(n_kinds):
        a, b, c = (_VOCAB[(k + j) % len(_VOCAB)] for j in (0, 7, 19))  # no word shared in place
        for i in range(per):
            text = f"Does the {a} reading near {b} show {c} behaviour at step {k * 10 + i}?"
            out.append(ErrorItem(f"k{k:02d}.{i}", text, ("Yes", "No")))
    return out


def test_builtin_triage_bounds_categories_when_kinds_hold_a_handful_of_errors():
    few = _many_kinds()
    assert ClusterTriage().categories_for(few) == 2
    assert ClusterTriage(few_categories=None).categories_for(few) is None
    assert ClusterTriage().categories_for(_errors()) is None  # 20 errors per kind
    res = cluster_errors(few, ClusterTriage(), CFG)
    assert res.caps == {"no_tool": 2}
    assert len({b.parent or b.id for b in res.buckets}) <= 2
    assert type(res).from_dict(res.to_dict()) == res
    plain = cluster_errors(_errors(), ClusterTriage(), CFG)
    assert plain.caps == {} and "caps" not in plain.to_dict()
    # the paper's clustering: the protocol's max_categories alone
    off = ProtocolConfig.from_params({"support.triage_bound": False})
    assert cluster_errors(few, ClusterTriage(), off).caps == {}


class Bounded(Flaky):
    """Asks for one category; records the bound every define call got."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def categories_for(self, errors):
        return 1

    def define(self, errors, k):
        self.seen.append(k)
        return super().define(errors, k)


def test_a_triage_bound_lowers_max_categories_for_define_and_resplit():
    t = Bounded()
    res = cluster_errors(_errors(), t, CFG.replace(resplit_above=8))
    assert t.seen and set(t.seen) == {1}
    assert res.caps == {"no_tool": 1, "tool_fired": 1}
    # a bound above the protocol's maximum never raises it
    t.categories_for = lambda errors: 50
    t.seen.clear()
    assert cluster_errors(_errors(), t, CFG).caps == {}
    assert max(t.seen) <= CFG.max_categories
