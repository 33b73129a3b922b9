#!/bin/bash
echo note > /root/note.txt
