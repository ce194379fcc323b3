"""`schedwatch verify`: run a command as it is and with the thread-pool fix, count both, and judge the fix."""
