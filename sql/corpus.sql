-- The de-duplicated corpus (Parquet asset `corpus`) and a per-source summary.
CREATE OR REPLACE VIEW corpus AS SELECT * FROM read_parquet('{parquet}/corpus.parquet');
CREATE OR REPLACE VIEW corpus_by_source AS
SELECT source, count(*) AS problems, avg(length(problem)) AS avg_problem_chars,
       avg(length(solution)) AS avg_solution_chars, sum(n_solutions > 1) AS with_several_solutions
FROM corpus GROUP BY source ORDER BY source;
