"""A recipe's CSV of one row per method, kept across runs that measure only some of its methods
(ONLY=...): the rows this run left out stay as they were, but only when made at this run's settings,
since one table must not mix two experiments."""
import csv
import os
import sys


def earlier_rows(path):
    """The rows of PATH by their method column; none when PATH does not exist yet."""
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {row["method"]: row for row in csv.DictReader(f)}


def kept_row(earlier, name, settings, path, recipe):
    """NAME's row from EARLIER when its columns equal SETTINGS (column -> this run's value), None when
    EARLIER has no row for NAME; exits with a one-line error naming the columns that differ otherwise."""
    row = earlier.get(name)
    if row is None:
        return None
    differ = [f"{column} {row.get(column)!r} (this run {str(value)!r})" for column, value in settings.items()
              if row.get(column) != str(value)]
    if differ:
        sys.exit(f"{recipe}: {path} holds {name} made with other settings: {', '.join(differ)}; "
                 f"run the recipe without ONLY, or with these settings")
    return row


def write_rows(path, rows):
    """PATH replaced at once by ROWS (written to PATH.part, then renamed), columns in the first row's order."""
    if not rows:
        sys.exit(f"no rows to write to {path}")
    part = path + ".part"
    with open(part, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(part, path)
