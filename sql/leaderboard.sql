-- The leaderboard (written by the `leaderboard` asset as Parquet), ranked within each setting.
CREATE OR REPLACE VIEW leaderboard_table AS
SELECT * FROM read_parquet('{parquet}/../leaderboard/leaderboard.parquet');
CREATE OR REPLACE VIEW leaderboard AS
SELECT rank() OVER (PARTITION BY setting ORDER BY "ndcg@10" DESC) AS rank, *
FROM leaderboard_table ORDER BY setting, rank;
