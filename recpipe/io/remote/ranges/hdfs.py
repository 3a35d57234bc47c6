"""HDFS range readers of the two clients ``recpipe.io.remote.hdfs`` opens: pyarrow's ``read_at`` and
hdfs-native's ``read_range``."""

__all__ = ["ArrowHdfsRanges", "NativeHdfsRanges", "hdfs_ranges"]


class ArrowHdfsRanges:
    """Ranges of one file through pyarrow's ``RandomAccessFile.read_at``."""

    def __init__(self, arrow_fs, path):
        self.file = arrow_fs.open_input_file(path)

    def fetch(self, start, end, timeout):
        return bytes(self.file.read_at(end - start, start))

    def close(self):
        self.file.close()


class NativeHdfsRanges:
    """Ranges of one file through hdfs-native's ``FileReader.read_range``."""

    def __init__(self, client, path):
        self.reader = client.read(path)

    def fetch(self, start, end, timeout):
        return bytes(self.reader.read_range(start, end - start))

    def close(self):
        self.reader.close()


def hdfs_ranges(fs, path, impl):
    """The range reader for a filesystem made by ``hdfs_url_to_fs``."""
    if impl == "native":
        return NativeHdfsRanges(fs.client, path)
    return ArrowHdfsRanges(fs.fs, path)
