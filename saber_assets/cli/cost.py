"""`saber cost`: the LLM calls, tokens and GPU-hours of a build, at its size or another."""

from __future__ import annotations

import argparse

from saber_assets.config import DEFAULT_CONFIG, load_config
from saber_assets.outputs import Outputs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cost", help="LLM calls, tokens and GPU-hours of a build")
    p.add_argument("--config", help="pipeline config YAML")
    p.add_argument("--problems", type=int, help="corpus size to cost (default: the corpus's own)")
    p.add_argument(
        "--plan", action="store_true",
        help="what more Swiss rounds would buy: the built leaderboard's rounds-vs-resolution "
        "curve beside the GPU-hours per extra round",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    return cost_cmd(args)


def cost_cmd(args) -> int:
    """LLM calls, tokens and GPU-hours of a build, per stage, for the config's throughput."""
    import numpy as np
    import polars as pl

    from saber_assets.cost import PAPER, build_cost, cost_table
    from saber_assets.ontology.domains import domain_names

    cfg = load_config(args.config)
    out = Outputs.of(cfg).parquet
    if (out / "corpus.parquet").exists():
        corpus = pl.read_parquet(out / "corpus.parquet", columns=["problem", "solution"])
        origin = f"the built corpus ({corpus.height:,} problems)"
    else:
        from saber_assets.config import SourceConfig
        from saber_assets.corpus.build import build_corpus

        present = [s for s in cfg.corpus.sources if s.file().exists()]
        stand_ins = not present
        if stand_ins:  # the prompts' lengths measured on problems of the same kind, said so
            present = [SourceConfig(name=b, bundled=b) for b in ("olympiadbench", "math")]
        sources = cfg.corpus.model_copy(update={"sources": present})
        corpus = build_corpus(sources, cfg.seed).corpus.select("problem", "solution")
        origin = f"the configured sources ({corpus.height:,} problems, not built yet)"
        if stand_ins:
            absent = ", ".join(s.name for s in cfg.corpus.sources)
            origin = (
                f"the bundled OlympiadBench and MATH problems ({corpus.height:,}), standing in: "
                f"none of the configured sources is there (not there: {absent})"
            )
        elif len(present) < len(cfg.corpus.sources):
            absent = [s.name for s in cfg.corpus.sources if s not in present]
            origin = (
                f"the sources that are there ({', '.join(s.name for s in present)}: "
                f"{corpus.height:,} problems; not there: {', '.join(absent)})"
            )
    rng = np.random.default_rng(cfg.seed)
    rows = corpus.rows()
    sample = [rows[i] for i in rng.choice(len(rows), min(200, len(rows)), replace=False)]
    calls = None
    if (out / "topic_annotations").exists():
        calls = pl.read_parquet(out / "topic_annotations", columns=["calls"])["calls"].mean()
    # a corpus not all there: costed at the size the config expects (pods.expected_problems)
    expected = cfg.pods.expected_problems if "not there" in origin else None
    n = args.problems or expected or corpus.height
    stages = build_cost(cfg, n, sample, len(domain_names(cfg.ontology)), calls)
    table = cost_table(stages, cfg)
    c = cfg.cost
    print(f"saber cost: config {args.config or DEFAULT_CONFIG} ({cfg.name}), {n:,} problems")
    print(f"  prompts measured on {len(sample)} problems of {origin}")
    topic = f"{calls:.2f} measured" if calls else f"{c.topic_calls_per_problem} assumed"
    print(f"  topic-scoring requests per problem: {topic}")
    print(
        f"  throughput per GPU (cost.*, assumptions): prefill {c.prefill_tokens_per_s:,.0f} "
        f"tok/s, decode {c.decode_tokens_per_s:,.0f} tok/s; {c.chars_per_token} chars/token"
    )
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_rows=20, tbl_width_chars=120):  # fmt: skip
        print(table)
    print(f"the paper: {PAPER}")
    print_new_model_games(cfg)
    if getattr(args, "plan", False):
        judge_hours = stages[-1].gpu_hours(c.prefill_tokens_per_s, c.decode_tokens_per_s)
        print_plan(cfg, judge_hours / cfg.tournament.rounds)
    from saber_assets.cost import model_len_needed
    from saber_resources.prompts import problem_text

    texts = [problem_text(p, s) for p, s in corpus.iter_rows()]
    need, detail = model_len_needed(cfg, texts)
    have = cfg.llm.max_model_len
    print(
        f"served context length needed: {need:,} tokens (longest judge prompt "
        f"{detail['prompt_tokens']:,} + answer budget {detail['answer_tokens']:,}); "
        f"llm.max_model_len = {have or 'the model’s own'}"
        + (
            " — TOO SMALL: raise it and the server's --max-model-len"
            if have and have < need
            else ""
        )
    )
    return 0


def print_new_model_games(cfg) -> None:
    """The judge games a new retriever's full-corpus holes cost, from the built fill's board."""
    import polars as pl

    from saber_assets.leaderboard.board import FILL_BOARD
    from saber_assets.leaderboard.holes import new_model_games

    games, k = cfg.leaderboard.fill_games, cfg.leaderboard.k
    path = Outputs.of(cfg).leaderboard / FILL_BOARD
    if not games:
        print("full-corpus fill: off (leaderboard.fill_games: 0): a new model costs no game")
        return
    if not path.exists():
        print(f"full-corpus fill: {games} games per hole; no built fill to size a new model by")
        return
    most, typical = new_model_games(pl.read_parquet(path), games, k)
    print(
        f"full-corpus fill: a new model costs at most {most:,} judge games (every place of its "
        f"top {k} a hole, {games} games each)"
        + (f"; the built systems' own holes would have cost {typical:,.0f}" if typical else "")
    )


def print_plan(cfg, gpu_hours_per_round: float) -> None:
    """The rounds-vs-resolution curve of the built leaderboard, extended, with its GPU-hours."""
    import polars as pl

    from saber_assets.cost import rounds_plan
    from saber_assets.leaderboard.board import CURVE, Board

    board_dir = Outputs.of(cfg).leaderboard
    curve = Board.read_curve(board_dir)
    print(f"\nplan: one more Swiss round costs {gpu_hours_per_round:.2f} GPU-hours at this size")
    if curve is None:
        print(
            f"  no rounds-vs-resolution curve at {board_dir / CURVE}: materialise the leaderboard of a "
            "benchmark that carries its judgments (leaderboard.resolution_draws > 0)"
        )
        return
    plan = rounds_plan(curve, gpu_hours_per_round)
    print(
        "  separable_pairs: system pairs the joint test (queries and judgments) orders; "
        "mean_width_joint: the mean joint 95% interval of nDCG. Measured: refitted on the first "
        "r rounds of the stored judgments; projected: the last measured step's gain per round."
    )
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_rows=200, tbl_width_chars=120, float_precision=3):  # fmt: skip
        print(plan)
