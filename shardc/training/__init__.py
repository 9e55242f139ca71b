"""GPT training on shardc: the model as einsum-style tensor IR (`gpt`, `ir_builder`),
reverse-mode autodiff (`autodiff`), AdamW (`optimizer`), the step functions (`step`),
grid, plan, policy and layouts (`mesh`, `axis`), data (`data`), the single-rank trainer
(`train`), the step compiled through the shard pipeline and run on ranks (`spmd`), and
sharded training on simulated or MPI ranks (`trainer`: `TrainingConfig(...).shard(...)`)."""
