"""What a run says while it trains and leaves behind when it ends: the progress line, run.json and the summary,
the history and memory callbacks, the learning-health monitor and its advice. Nothing is imported here.
"""
