"""Run a fairseq CLI and SIGKILL it at a chosen point (used by test_crash_safe.py).

    FAULT=update:N  python tests/fault_injection.py fairseq-train ARGS   # right after update N
    FAULT=save:N    ...   # while writing the N-th checkpoint file (half of it written)
    FAULT=copy:N    ...   # while copying a checkpoint to checkpoint_last.pt the N-th time
    FAULT=full:N    ...   # the N-th checkpoint write finds the disk full (half written, then
                          # OSError ENOSPC): the process is not killed, the error propagates
"""

import errno

import io
import os
import shutil
import signal
import sys

import torch


def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main():
    kind, n = os.environ["FAULT"].split(":")
    n = int(n)
    calls = [0]
    if kind == "update":
        from fairseq.trainer import Trainer

        train_step = Trainer.train_step

        def killing_train_step(self, *args, **kwargs):
            out = train_step(self, *args, **kwargs)
            if self.get_num_updates() == n:
                die()
            return out

        Trainer.train_step = killing_train_step
    elif kind == "save":
        save = torch.save

        def killing_save(obj, f, *args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                buf = io.BytesIO()
                save(obj, buf, *args, **kwargs)
                f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
                f.flush()
                die()
            return save(obj, f, *args, **kwargs)

        torch.save = killing_save
    elif kind == "copy":
        copyfile = shutil.copyfile

        def killing_copyfile(src, dst, *args, **kwargs):
            calls[0] += "checkpoint_last" in os.path.basename(dst)
            if calls[0] == n:
                with open(src, "rb") as fin, open(dst, "wb") as fout:
                    data = fin.read()
                    fout.write(data[: len(data) // 2])
                die()
            return copyfile(src, dst, *args, **kwargs)

        shutil.copyfile = killing_copyfile
    elif kind == "full":
        save = torch.save

        def full_disk_save(obj, f, *args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                f.write(b"half a checkpoint")
                raise OSError(errno.ENOSPC, "No space left on device")
            return save(obj, f, *args, **kwargs)

        torch.save = full_disk_save
    else:
        raise SystemExit(f"unknown FAULT {kind}")
    cli = sys.argv[1]
    sys.argv = [cli] + sys.argv[2:]
    if cli == "fairseq-train":
        from fairseq_cli.train import cli_main
    else:
        raise SystemExit(f"unsupported CLI {cli}")
    cli_main()


if __name__ == "__main__":
    main()
