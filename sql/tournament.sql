-- Every judgment of every domain's tournament (Parquet asset `tournament_judgments`).
CREATE OR REPLACE VIEW judgments AS
SELECT * FROM read_parquet('{parquet}/tournament_judgments/*.parquet', union_by_name = true);
