"""`schedwatch top`'s view: rows from two readings (table), the screen that shows them (screen), the keys (keys)."""
