"""Peer ranking: a population of models answers scenarios, its members judge each
other's replies in pairs, and the verdicts are fitted (low-rank Bradley-Terry-Davidson,
EigenTrust, Elo) into a leaderboard with intervals. `run` collects and fits a rank
config, `fitting` turns verdicts into a ranking record, `record` holds the records.

Nothing is imported here: `eigenjury batch` and the viewer load no statistics."""
