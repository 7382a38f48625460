"""Graph passes: each a function Graph -> Graph (or an analysis of a Graph)."""
