"""``python -m grpo_lite.cli`` runs the ``grpo-lite`` command."""

from grpo_lite.cli import main

raise SystemExit(main())
