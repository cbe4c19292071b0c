"""Every stage asset's declaration (``lib/declare.py``), gathered from the stages' asset modules:
what the definitions build, the pod sizer reads (``pods.pod_size``) and the code versions hash."""

from __future__ import annotations

from saber_assets.analyses import assets as analysis_assets
from saber_assets.analyses import judge_assets, recall_assets
from saber_assets.annotations import assets as annotation_assets
from saber_assets.benchmark import assets as benchmark_assets
from saber_assets.candidates import assets as candidate_assets
from saber_assets.contamination import assets as contamination_assets
from saber_assets.contamination import published_assets
from saber_assets.corpus import assets as corpus_assets
from saber_assets.leaderboard import assets as leaderboard_assets
from saber_assets.leaderboard import fill_assets, verify_asset
from saber_assets.lib.declare import Declared, declared_in
from saber_assets.ontology import assets as ontology_assets
from saber_assets.ratings import assets as rating_assets
from saber_assets.retrievers import assets as retriever_assets
from saber_assets.runs import assets as runs_assets
from saber_assets.signals import assets as signal_assets
from saber_assets.site import explorer_assets, report_assets
from saber_assets.stages import ANALYSES
from saber_assets.tournament import assets as tournament_assets

# the stages' asset modules: their declarations (lib/declare.py) are built here, with the
# config's partitions and pod sizes
STAGE_MODULES = [
    corpus_assets,
    ontology_assets,
    annotation_assets,
    signal_assets,
    published_assets,
    candidate_assets,
    tournament_assets,
    rating_assets,
    benchmark_assets,
    retriever_assets,
    runs_assets,
    fill_assets,
    leaderboard_assets,
    verify_asset,
    contamination_assets,
    analysis_assets,
    judge_assets,
    recall_assets,
    explorer_assets,
]


def stage_declarations() -> list[Declared]:
    """Every stage asset and check, and the report over the analyses that declare a section (in
    the order of ``stages.ANALYSES``)."""
    declared = declared_in(STAGE_MODULES)
    sections = {d.asset_name: d.section for d in declared if d.section is not None}
    order = {name: n for n, name in enumerate(ANALYSES)}
    ordered = dict(sorted(sections.items(), key=lambda kv: order[kv[0]]))
    return [*declared, report_assets.benchmark_report(ordered)]
