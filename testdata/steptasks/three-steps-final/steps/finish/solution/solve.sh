#!/bin/bash
echo three >> /root/state.txt
