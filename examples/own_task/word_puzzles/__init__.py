"""Word puzzles with text answers, trained with grpo-lite: the rewards are in :mod:`word_puzzles.rewards`."""
