-- The leaderboard (DuckDB table written by the `leaderboard` asset), ranked within each setting.
CREATE OR REPLACE VIEW leaderboard AS
SELECT rank() OVER (PARTITION BY setting ORDER BY "ndcg@10" DESC) AS rank, *
FROM leaderboard_table ORDER BY setting, rank;
