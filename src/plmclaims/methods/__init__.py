"""Methods, one module each. Methods a well-kept library provides (peft, mteb) come from that library."""
