"""DDP on CPU (torchrun + gloo): torch refuses device ids for a CPU module."""

from ..edits import Edit, FilePatch

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/models/distributed_fairseq_model.py",
        "DDP on CPU (torchrun + gloo): no device ids",
        (
            Edit(
                "            device_ids=[args.device_id],\n"
                "            output_device=args.device_id,\n"
                "            broadcast_buffers=args.broadcast_buffers,\n"
                "            bucket_cap_mb=args.bucket_cap_mb,\n",
                "            device_ids=None if device.type == \"cpu\" else [args.device_id],\n"
                "            output_device=None if device.type == \"cpu\" else args.device_id,\n"
                "            broadcast_buffers=args.broadcast_buffers,\n"
                "            bucket_cap_mb=args.bucket_cap_mb,\n",
            ),
        ),
    ),
)
