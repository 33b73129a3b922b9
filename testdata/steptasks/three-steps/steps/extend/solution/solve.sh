#!/bin/bash
echo two >> /root/state.txt
