"""The judging plan as a settings section: the same flags on `compare` and `report`, YAML and
flags filling the same fields, and the family's correction named from one place."""

import re

import pytest

from conftest import invoke
from factories import context, pruned, shorter
from fineprune_cli.analysis.decide import judging, procedures
from fineprune_cli.analysis.decide.judging import Judging, load_judging
from fineprune_cli.analysis.decide.procedures import Correction
from fineprune_cli.analysis.decide.sequence import record
from fineprune_cli.analysis.render.summary import summary_rows
from fineprune_cli.analysis.render.verdict import build
from fineprune_cli.analysis.study import study
from fineprune_cli.errors import ConfigError

FLAGS = ("--margin", "--min-gain", "--alpha", "--family", "--target")


def _flags(command):
    text = invoke([command, "--help"]).output
    return {f for f in FLAGS if re.search(rf"{f}\b", text)}


def test_compare_and_report_take_the_same_judging_flags():
    assert _flags("compare") == _flags("report") == set(FLAGS)


def test_yaml_and_flags_fill_the_same_fields_and_unknown_keys_are_refused(tmp_path):
    config = tmp_path / "e.yaml"
    config.write_text("judging:\n  margin: 0.5\n  alpha: 0.1\n")
    found = load_judging(config, {"judging.alpha": 0.02, "judging.min_gain": None})
    assert (found.margin, found.alpha, found.gain) == (0.5, 0.02, 0.5)  # flags over the file
    config.write_text("judging:\n  margins: 0.5\n")
    with pytest.raises(ConfigError, match="unknown key 'judging.margins'"):
        load_judging(config, {})


def _runs():
    name, kw = shorter(0.3)
    arms = {"regular": (0.0, {}), name: (-1.5, kw), "ucb": (0.0, pruned("ucb", 0.3))}
    arms["egreedy"] = (-1.2, pruned("egreedy", 0.3))
    return [run for seeds in context(arms).values() for run in seeds.values()]


def test_switching_the_correction_renames_it_in_every_sentence(monkeypatch):
    """A second correction (Šidák's, for the test) named in the family sentence, every decision's
    chain, the looks record, and nowhere Bonferroni: the name comes from one place."""
    sidak = Correction(
        "sidak",
        "Šidák",
        "each policy's claims at 1 - (1 - alpha)^(1 / (policies x looks))",
        "Šidák over {policies}{looks_text}: each policy's claims are tested at {level}",
        lambda claims, k: [1 - (1 - c.p) ** (k / c.share) for c in claims],
        lambda alpha, k, looks: 1 - (1 - alpha) ** (1 / (k * looks)),
    )
    monkeypatch.setitem(procedures.FAMILIES, "sidak", sidak)
    found = study(_runs(), Judging(family="sidak"))
    text = "\n".join(build(found).markdown())
    assert "Šidák over 2 policies" in text and "Šidák-adjusted in brackets" in text
    assert text.count("Šidák-adjusted p") == len(found.decisions)
    assert "Bonferroni" not in text
    assert record((2, 3), [], found.decisions, found.judging)["rule"] == "Šidák"
    rows = [r for r in summary_rows(found) if r["decision"]]
    d = found.decisions[0]
    assert rows[0]["p_adjusted"] == pytest.approx(1 - (1 - d.p_claim) ** 2)
    assert d.level == pytest.approx(1 - 0.95**0.5)  # the bounds at Šidák's level, not alpha / k


def test_the_family_help_lists_each_correction_by_its_entry():
    """`--family`'s help (the flag's and the settings page's) is built from FAMILIES: every entry by
    the name the flag takes and its own help, and the default the field has."""
    text = judging.FIELDS["family"].metadata["help"]
    assert procedures.FAMILIES, "no correction to list"
    for key, correction in procedures.FAMILIES.items():
        assert f"{key} ({correction.help})" in text
    assert text.endswith(f"(default {Judging().family})")


def _holm(calls):
    """Holm's step-down over the policies, worth-it and not-worth-it claims apart (the test's
    own procedure: it needs every claim of a look at once, which a one-p-value rule never had)."""

    def adjust(claims, k):
        calls.append(list(claims))
        out = [1.0] * len(claims)
        for start in (0, 1):  # the worth claims, then the not-worth ones
            ranked = sorted(range(start, len(claims), 2), key=lambda i: claims[i].p)
            running = 0.0
            for j, i in enumerate(ranked):
                running = max(running, min(1.0, (k - j) * claims[i].p / claims[i].share))
                out[i] = running
        return out

    return Correction(
        "holm-test",
        "Holm (test)",
        "step-down",
        "Holm over {policies}{looks_text}: at most {level}",
        adjust,
        lambda alpha, k, share: alpha * share / k,
    )


def test_a_family_procedure_added_from_a_test_gets_every_claim_of_a_look_at_once(monkeypatch, tmp_path):
    """A step-down registered by a test alone (no source file edited) is a valid --family, is
    handed all of a report's claims together, and its adjusted p-values decide."""
    calls = []
    monkeypatch.setitem(procedures.FAMILIES, "holm-test", _holm(calls))  # taken out again after the test
    found = study(_runs(), Judging(family="holm-test"))
    assert len(calls[0]) == 2 * len(found.decisions)  # the decisions: two claims per policy, one call
    assert all(len(c) == 2 for c in calls[1:])  # the what-ifs (another δ, pooled sd): one policy's own
    by_p = sorted(found.decisions, key=lambda d: d.p_claim)
    k = len(by_p)
    assert by_p[0].p_adjusted == pytest.approx(min(1.0, k * by_p[0].p_claim))
    if by_p[1].route == by_p[0].route:  # the second smallest of the same kind gets k - 1
        assert by_p[1].p_adjusted == pytest.approx(max(by_p[0].p_adjusted, min(1.0, (k - 1) * by_p[1].p_claim)))
    assert "Holm (test)-adjusted in brackets" in "\n".join(build(found).markdown())
    out = invoke(["report", "results/demo/runs", "--family", "holm-test", "--no-plots", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "Holm (test)" in (tmp_path / "index.md").read_text()


def test_a_variance_model_added_from_a_test_decides_and_is_named_in_plans_and_reports(monkeypatch):
    """A variance model registered by a test alone is a valid --variance, gives every comparison
    its estimate, is named in each decision's line and in the plan, and a plan that names a model
    this version lacks makes the report post hoc."""
    from fineprune_cli.analysis.decide import plan as plans
    from fineprune_cli.analysis.decide import stats
    from fineprune_cli.analysis.decide.procedures import VarianceModel

    seen = []

    def wide(p, q):  # the own paired t, twice as wide: fewer decisions, never more
        seen.append(p)
        e = stats.paired_estimate(p.values(), q)
        return None if e is None else stats.Estimate(e.mean, 2 * e.se, e.df, e.n, e.sd, False)

    monkeypatch.setitem(
        procedures.VARIANCES, "wide-test", VarianceModel("wide-test", "twice the paired se (test)", "test", wide)
    )
    j = load_judging(None, {"judging.variance": "wide-test"})
    found = study(_runs(), j)
    assert seen and all(d.variance == "twice the paired se (test)" for d in found.decisions)
    assert "twice the paired se (test), " in "\n".join(build(found).markdown())
    own = {(d.policy, d.p_claim) for d in study(_runs(), Judging()).decisions}
    assert {(d.policy, d.p_claim) for d in found.decisions} != own  # the model decided, not the default
    recorded = plans.Plan(j, (), j.variance_model.label)
    read_back = plans.from_dict(recorded.to_dict(), "plan.json")
    assert read_back.judging.variance == "wide-test" and read_back.variance == "twice the paired se (test)"
    assert not any("variance" in r for r in plans.post_hoc([read_back], j))
    del procedures.VARIANCES["wide-test"]
    gone = plans.from_dict(recorded.to_dict(), "plan.json")
    assert any("which this version does not have" in r for r in plans.post_hoc([gone], Judging()))
