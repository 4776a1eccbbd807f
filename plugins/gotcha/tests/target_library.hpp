#pragma once
extern "C" {
int kgt_add(int a, int b);
void kgt_store(int* destination, int value);
int kgt_countdown(int n);
int kgt_add_inside_library(int a, int b);
int kgt_called_by_nobody(int a);
// In the library loaded later with dlopen (it calls kgt_add from its own GOT).
int kgt_later_add(int a, int b);
}
