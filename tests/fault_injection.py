"""Run a fairseq CLI and SIGKILL it at a chosen point (used by test_crash_safe.py).

    FAULT=update:N  python tests/fault_injection.py fairseq-train ARGS   # right after update N
    FAULT=save:N    ...   # while writing the N-th checkpoint file (half of it written)
    FAULT=copy:N    ...   # while copying a checkpoint to checkpoint_last.pt the N-th time
    FAULT=full:N    ...   # the N-th checkpoint write finds the disk full (half written, then
                          # OSError ENOSPC): the process is not killed, the error propagates
    FAULT=results:N python tests/fault_injection.py fairseq-generate ARGS   # the N-th line of
                          # --results-path's file finds the disk full (half of it written)
    FAULT=binarize:N python tests/fault_injection.py fairseq-preprocess ARGS   # the N-th sentence
                          # binarized finds the disk full (half of it written; --workers 1)
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
    cli = sys.argv[1]
    sys.argv = [cli] + sys.argv[2:]  # before fairseq is imported: its hook prints a fairseq-* tool's error in one line
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
    elif kind == "results":
        import fairseq_cli.generate as generate

        def full_disk_print(*args, file=None, **kwargs):
            if file is None or file is sys.stdout:
                return print(*args, file=file, **kwargs)
            calls[0] += 1
            if calls[0] == n:
                file.write(str(args[0])[: len(str(args[0])) // 2])
                file.flush()
                raise OSError(errno.ENOSPC, "No space left on device")
            return print(*args, file=file, **kwargs)

        generate.print = full_disk_print  # the module's print: generate writes its results with it
    elif kind == "binarize":
        from fairseq.data import indexed_dataset

        add_item = indexed_dataset.MMapIndexedDatasetBuilder.add_item

        def full_disk_add_item(self, tensor):
            calls[0] += 1
            if calls[0] == n:
                self._data_file.write(b"half")
                raise OSError(errno.ENOSPC, "No space left on device")
            return add_item(self, tensor)

        indexed_dataset.MMapIndexedDatasetBuilder.add_item = full_disk_add_item
    else:
        raise SystemExit(f"unknown FAULT {kind}")
    if cli == "fairseq-train":
        from fairseq_cli.train import cli_main
    elif cli == "fairseq-generate":
        from fairseq_cli.generate import cli_main
    elif cli == "fairseq-preprocess":
        from fairseq_cli.preprocess import cli_main
    else:
        raise SystemExit(f"unsupported CLI {cli}")
    cli_main()


if __name__ == "__main__":
    main()
