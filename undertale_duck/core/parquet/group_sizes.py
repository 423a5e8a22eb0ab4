"""Estimate each row group's size once decoded to Arrow, from a footer (for window plans)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from .pages import WIDTHS

#: Arrow bytes per value of each Parquet physical type: its width in a page (0: variable
#: length), and INT96 decoded to an 8-byte timestamp.
VALUE_BYTES = {**WIDTHS, "INT96": 8}
#: Narrow integers, which Parquet stores as INT32 and Arrow decodes to their own width.
NARROW = {"INT_8": 1, "UINT_8": 1, "INT_16": 2, "UINT_16": 2}


def decoded_sizes(meta: pq.FileMetaData) -> tuple[int, ...]:
    """Estimate each row group's size once decoded to Arrow, from its footer's value counts.

    A footer records each row group's encoded size, which dictionary and run-length
    encoding can make many times smaller than the Arrow columns a read produces (an int32
    token column padded with zeros, say). Fixed-width columns count ``values x width``,
    byte arrays their encoded size plus an offset per value, repeated columns an offset per
    row. Only planning uses it (windows are cut by the larger of this and the footer's
    size); what a read decompresses is still the footer's size.

    Args:
        meta: A shard's footer.

    Returns:
        One estimate per row group, or ``()`` if the footer cannot be walked.
    """
    try:
        leaves = []
        for i in range(meta.num_columns):
            column = meta.schema.column(i)
            physical = column.physical_type
            width = VALUE_BYTES.get(physical, 0)
            width = NARROW.get(str(column.converted_type), width)  # int8/16 stored as INT32
            if physical == "FIXED_LEN_BYTE_ARRAY":
                width = max(0, int(column.length))
            leaves.append((width, column.max_repetition_level > 0))
        sizes = []
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            total = 0
            rows = max(0, int(group.num_rows))
            for i, (width, repeated) in enumerate(leaves):
                chunk = group.column(i)
                values = max(0, int(chunk.num_values))
                if width:
                    total += values * width
                else:  # the values' bytes are at least their encoded size; an offset each
                    total += max(0, int(chunk.total_uncompressed_size)) + 4 * values
                total += 4 * rows if repeated else 0  # a list offset per row
            sizes.append(total)
        return tuple(sizes)
    except (ValueError, IndexError, TypeError, pa.ArrowException):
        return ()


__all__ = ["NARROW", "VALUE_BYTES", "decoded_sizes"]
