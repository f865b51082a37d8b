#!/usr/bin/env python3
"""Writes config files with the real producers, into DIR, for
tests/scripts/test_config_files.sh:
  accelerate_ddp.yaml, accelerate_fsdp.yaml, accelerate_zero2.yaml
      accelerate's own ClusterConfig(...).to_yaml_file (what `accelerate
      config` saves);
  args_ddp.json, args_fsdp.json, args_deepspeed.json
      transformers' TrainingArguments(...).to_json_string() (what
      HfArgumentParser.parse_json_file reads back).
The deepspeed and ddp_backend fields are set after construction:
TrainingArguments' own __post_init__ would import the deepspeed package (not
installed) or start a process group (no launcher here); to_json_string then
writes them as it writes every field.

usage: write_config_producers.py DIR
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")
from accelerate.commands.config.config_args import ClusterConfig  # noqa: E402
from transformers import TrainingArguments  # noqa: E402


def accelerate_config(path, distributed_type, **extra):
    ClusterConfig(compute_environment="LOCAL_MACHINE", distributed_type=distributed_type, mixed_precision="no",
                  use_cpu=True, debug=False, num_processes=2, num_machines=1, machine_rank=0,
                  main_training_function="main", rdzv_backend="static", same_network=True, **extra).to_yaml_file(path)


def training_arguments(path, **fields):
    late = {name: fields.pop(name) for name in ("deepspeed", "ddp_backend") if name in fields}
    args = TrainingArguments(output_dir="checkpoints", per_device_train_batch_size=4, gradient_accumulation_steps=2,
                             learning_rate=2e-3, weight_decay=0.1, adam_beta2=0.95, max_steps=4,
                             lr_scheduler_type="cosine", warmup_steps=1, logging_steps=1, seed=42, use_cpu=True,
                             save_strategy="no", report_to="none", ddp_timeout=300, **fields)
    for name, value in late.items():
        setattr(args, name, value)
    with open(path, "w") as out:
        out.write(args.to_json_string())


def main(out):
    accelerate_config(os.path.join(out, "accelerate_ddp.yaml"), "MULTI_CPU")
    accelerate_config(os.path.join(out, "accelerate_fsdp.yaml"), "FSDP", fsdp_config={
        "fsdp_version": 2, "fsdp_reshard_after_forward": True, "fsdp_offload_params": False,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_transformer_layer_cls_to_wrap": "DecoderLayer",
        "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_cpu_ram_efficient_loading": True,
        "fsdp_activation_checkpointing": False})
    accelerate_config(os.path.join(out, "accelerate_zero2.yaml"), "DEEPSPEED", deepspeed_config={
        "zero_stage": 2, "offload_optimizer_device": "cpu", "offload_param_device": "none",
        "gradient_accumulation_steps": 1, "gradient_clipping": 1.0, "zero3_init_flag": False})
    training_arguments(os.path.join(out, "args_ddp.json"), ddp_backend="gloo", ddp_find_unused_parameters=False,
                       ddp_bucket_cap_mb=4, dataloader_pin_memory=True,
                       dataloader_num_workers=2, dataloader_prefetch_factor=3,
                       dataloader_persistent_workers=True, accelerator_config={"non_blocking": True})
    training_arguments(os.path.join(out, "args_fsdp.json"), fsdp="full_shard auto_wrap",
                       fsdp_config={"transformer_layer_cls_to_wrap": ["DecoderLayer"], "reshard_after_forward": True})
    training_arguments(os.path.join(out, "args_deepspeed.json"), deepspeed={
        "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto", "gradient_clipping": "auto",
        "zero_optimization": {"stage": 1, "overlap_comm": True}})
    print(json.dumps(sorted(os.listdir(out))))


if __name__ == "__main__":
    main(sys.argv[1])
