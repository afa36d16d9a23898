"""from_pretrained with an archive: only files and folders under the destination, bounded in
size and count; the user's archive is kept and the temporary copy removed."""

from ..edits import CopiedModule, Edit, FilePatch, insert_after

# The checks and the extraction are runtime/hub_archives.py (copied into fairseq);
# load_archive_file calls them.
COPIES = (CopiedModule("hub_archives", "hub archives: only files and folders under the destination"),)

PATCHES = (
    FilePatch(
        "fairseq",
        "fairseq/file_utils.py",
        "hub archives: only files and folders under the destination; the archive is kept",
        (
            insert_after(
                "import tarfile\n",
                "from fairseq._define_runtime.hub_archives import *  # noqa: F401 F403  (fairseq_define)\n",
            ),
            Edit(
                "                archive_file,\n            )\n        )\n        return None\n",
                "                archive_file,\n            )\n        )\n"
                "        raise archive_not_found(archive_file)  # (fairseq_define) not None: a TypeError later\n",
            ),
            Edit(
                '        with tarfile.open(resolved_archive_file, "r:" + ext) as archive:\n'
                "            top_dir = os.path.commonprefix(archive.getnames())\n"
                "            archive.extractall(tempdir)\n"
                "        os.remove(resolved_archive_file)\n",
                "        top_dir = extract_checked(resolved_archive_file, tempdir, ext)  # (fairseq_define)\n"
                "        if resolved_archive_file == archive_file:  # the user's own file: kept as it is\n"
                "            return temporary_folder(tempdir, top_dir)\n"
                "        os.remove(resolved_archive_file)\n",
            ),
        ),
    ),
)
