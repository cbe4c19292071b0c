"""The observe jobs: what a build (and the input-files sensor) runs before it asks what is
unsynced, so that the input files', the registry's and the training corpora's data versions are
current. Referenced as objects everywhere (their names are theirs)."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

observe_inputs = define_asset_job(
    "observe_inputs",
    selection=AssetSelection.assets("corpus_sources", "ontology_files", "human_labels"),
    executor_def=in_process_executor,
    description="Observe the corpus source files and the ontology's (content hashes), and "
    "people's labels in the stores.",
)
observe_registry = define_asset_job(
    "observe_registry",
    selection=AssetSelection.assets("retriever_registry"),
    executor_def=in_process_executor,
    description="Observe the retriever registry, one data version per entry.",
)
observe_training = define_asset_job(
    "observe_training",
    selection=AssetSelection.assets("training_corpora"),
    executor_def=in_process_executor,
    description="Observe the training corpora the registry declares with text, one data "
    "version per corpus.",
)

# observed before a build, in this order
OBSERVE_JOBS = (observe_inputs, observe_registry, observe_training)
