/**
 * Chat templates for tool-calling tests: the demo's `chatmlTools` offers tools in the system message and
 * writes calls as JSON inside <tool_call> tags (node-llama-cpp reads that syntax from the template);
 * the demo's `llama2` has no place for tools, so node-llama-cpp documents them in the system prompt and
 * uses its own call syntax.
 */
import {demoChatTemplates} from "../../engine/model/demoModel.js";

export const toolTemplates = {chatmlTools: demoChatTemplates.chatmlTools, llama2: demoChatTemplates.llama2} as const;
