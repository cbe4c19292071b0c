"""ontology stage: topic DAG -> tree with domains (IC needs annotation counts: annotations stage)."""

import polars as pl
from dagster import (
    AssetExecutionContext,
    MetadataValue,
    Output,
)

from saber_assets.lib.declare import input_files_asset, table_asset
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.ontology.domains import domain_spec, keys_for, resolve_domains
from saber_assets.ontology.tree import expand_to_tree, load_dag
from saber_assets.pipeline import PipelineResource

ontology_files = input_files_asset(
    "ontology_files", __name__, "The ontology's files (bundled or configured), by content hash."
)


@table_asset(reads=("ontology",), kinds={"networkx", "parquet"}, deps=[ontology_files])
def ontology_tree(
    context: AssetExecutionContext, pipeline: PipelineResource
) -> Output[pl.DataFrame]:
    """The topic DAG expanded to a tree (one node per root path), preorder, with each node's domain."""
    cfg = pipeline.load()
    dag = load_dag(cfg.ontology)
    domain_of, domains = resolve_domains(dag, domain_spec(cfg.ontology))
    tree = expand_to_tree(dag, domain_of, max_nodes=cfg.ontology.max_tree_nodes)
    df = tree.to_frame()
    for w in dag.warnings:
        context.log.warning(f"ontology data warning: {w}")
    by_domain = (
        df.group_by("domain")
        .agg(pl.len().alias("tree_nodes"), pl.col("topic").n_unique().alias("topics"))
        .sort("domain", nulls_last=True)
    )
    by_depth = df.group_by("depth").len().sort("depth")
    return Output(
        df,
        metadata={
            **stage_metadata(df.height),
            "topics": dag.n_topics,
            "tree_nodes": tree.n_nodes,
            "domains": MetadataValue.json(
                {dag.graph.nodes[k]["title"]: d for k, d in domain_of.items()}
            ),
            "domain_list": ", ".join(domains),
            # the domain partitions' keys (and file names): a title's slug where it holds a
            # character a key cannot
            "partition_keys": MetadataValue.json(keys_for(domains)),
            "duplicated_topics": int((df.group_by("topic").len()["len"] > 1).sum()),
            "max_depth": int(tree.depth.max()),
            "per_domain": markdown_table(by_domain),
            "per_depth": markdown_table(by_depth),
            "data_warnings": MetadataValue.md("\n".join(f"- {w}" for w in dag.warnings) or "none"),
        },
    )
