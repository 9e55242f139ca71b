"""GPT training on shardc: the model as einsum-style tensor IR (`gpt`, `ir_builder`),
reverse-mode autodiff (`autodiff`), AdamW (`optimizer`), the step functions (`step`),
grid, plan, policy and layouts (`mesh`, `axis`), data (`data`) and the trainer (`train`)."""
