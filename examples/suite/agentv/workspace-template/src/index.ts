// TODO: return the sum of a and b.
export function add(a: number, b: number): number {
  throw new Error("TODO: add");
}

// TODO: return s with its characters in reverse order.
export function reverse(s: string): string {
  throw new Error("TODO: reverse");
}
