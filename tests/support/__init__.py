"""What the tests share: runs of arl-learn, the zygote, small environments, the Unity stand-in build."""
