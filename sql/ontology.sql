-- The expanded topic tree (Parquet asset `ontology_tree`): one row per tree node, preorder.
CREATE OR REPLACE VIEW ontology_tree AS SELECT * FROM read_parquet('{parquet}/ontology_tree.parquet');
CREATE OR REPLACE VIEW ontology_domains AS
SELECT domain, count(*) AS tree_nodes, count(DISTINCT topic) AS topics, max(depth) AS max_depth
FROM ontology_tree WHERE domain IS NOT NULL GROUP BY domain ORDER BY domain;
