"""Settings shared by the tests that train the tiny random Llama for a few steps."""

# 4 generations of 16 tokens per prompt and a dense reward: a random model earns no XML reward.
TINY_RUN = dict(
    dataset="synthetic",
    rewards=["length"],
    num_generations=4,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=1,
    max_completion_length=16,
    learning_rate=1e-2,
    quiet=True,
)
