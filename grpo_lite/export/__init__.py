"""Stage 4d of the pipeline: a trained model folder -> one GGUF file that llama.cpp, Ollama and LM Studio open.

- :mod:`~grpo_lite.export.gguf_file`: ``export_gguf()``: the steps in order, and the atomic write.
- :mod:`~grpo_lite.export.source`: a run folder or model folder -> the weights (a LoRA adapter merged), the
  config, the tokenizer, and the GGUF file the run started from, if any.
- :mod:`~grpo_lite.export.hparams`: the supported architectures and their hyperparameter keys.
- :mod:`~grpo_lite.export.tensors`: weights -> GGUF tensor names, llama.cpp's q/k layout, quantization.
- :mod:`~grpo_lite.export.vocab`: tokenizer metadata, carried from the source GGUF or built from the HF tokenizer.
- :mod:`~grpo_lite.export.runtimes`: what a runtime needs next to the file: an Ollama Modelfile, the system prompt, the llama-cli line.

``train(..., export="gguf")`` runs this stage at the end of a run: :mod:`grpo_lite.api` hands the training
pipeline an :class:`~grpo_lite.export.after_training.ExportAfterTraining`; the pipeline never imports this package. torch, transformers, PEFT and gguf are imported inside functions.
"""
