"""The pipeline config: keys that moved under their package still read from their old place,
with a message naming the new one."""

from __future__ import annotations

import pytest

from saber_assets.config import REPO_ROOT, ConfigDeprecation, PipelineConfig, load_config

CORPUS = {"sources": [{"name": "math", "bundled": "math"}]}


def test_moved_keys_read_from_their_old_place_with_a_deprecation_message():
    old = {
        "corpus": CORPUS,
        "leaderboard": {
            "benchmark": "/data/sabermath",
            "registry": "mine.yaml",
            "settings": ["full-full"],
            "full_corpus": False,
            "contamination": {"top_candidates": 3, "fold_numbers": False},
            "k": 5,
        },
    }
    with pytest.warns(ConfigDeprecation) as seen:
        cfg = PipelineConfig.model_validate(old)
    said = sorted(str(w.message) for w in seen)
    assert "config: leaderboard.registry is now retrievers.registry" in said[3]
    assert any("leaderboard.contamination is now contamination" in s for s in said)
    assert cfg.benchmark.path == "/data/sabermath" and cfg.retrievers.registry == "mine.yaml"
    assert cfg.retrievers.settings == ["full-full"] and cfg.retrievers.full_corpus is False
    assert cfg.contamination.top_candidates == 3 and cfg.contamination.fold_numbers is False
    assert cfg.leaderboard.k == 5
    # the same config in the new places: equal, and no message
    new = {
        "corpus": CORPUS,
        "benchmark": {"path": "/data/sabermath"},
        "retrievers": {"registry": "mine.yaml", "settings": ["full-full"], "full_corpus": False},
        "contamination": {"top_candidates": 3, "fold_numbers": False},
        "leaderboard": {"k": 5},
    }
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigDeprecation)
        assert PipelineConfig.model_validate(new) == cfg


def test_a_key_in_both_places_is_an_error_naming_the_one_to_keep():
    doc = {"corpus": CORPUS, "leaderboard": {"registry": "a.yaml"},
           "retrievers": {"registry": "b.yaml"}}  # fmt: skip
    with pytest.raises(ValueError, match="keep retrievers.registry"):
        PipelineConfig.model_validate(doc)


def test_the_shipped_configs_use_no_old_key():
    import warnings

    for path in sorted((REPO_ROOT / "configs").glob("*.yaml")):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConfigDeprecation)
            load_config(path)


def test_a_config_extends_another_section_by_section(tmp_path):
    """`extends`: the other config's sections merged key by key, lists and values replaced; a
    circle is refused with its chain."""
    from saber_assets.config import load_config

    (tmp_path / "base.yaml").write_text(
        "name: base\nseed: 3\ntournament: {rounds: 7, presentation: by_id}\n"
        "corpus: {sources: [{name: math, bundled: math}], max_problem_chars: 999}\n"
    )
    (tmp_path / "child.yaml").write_text(
        "extends: base.yaml\nname: child\ntournament: {rounds: 2}\n"
        "corpus: {sources: [{name: ob, bundled: olympiadbench}]}\n"
    )
    cfg = load_config(tmp_path / "child.yaml")
    assert (cfg.name, cfg.seed, cfg.tournament.rounds) == ("child", 3, 2)
    assert cfg.tournament.presentation == "by_id" and cfg.corpus.max_problem_chars == 999
    assert [s.name for s in cfg.corpus.sources] == ["ob"]
    (tmp_path / "base.yaml").write_text("extends: child.yaml\nname: base\n")
    with pytest.raises(ValueError, match="runs in a circle"):
        load_config(tmp_path / "child.yaml")
